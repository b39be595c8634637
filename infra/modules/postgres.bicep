// The answers and ratings store shared by every replica (CRAG_FEEDBACK_STORE=postgres). Microsoft
// Entra authentication only: no password exists. The server's one Entra administrator is the
// migration identity, used only by the migration job (modules/jobs.bicep), which owns the schema and
// makes the bot's own role (feedback/postgres_roles.py: data rights on the feedback tables,
// nothing else). The bot logs in as that role with its managed identity's token. Reached only
// through its private endpoint: no public access, no firewall rule.
param name string
param location string
param tags object
param databaseName string
@description('The migration identity: the server\'s Entra administrator.')
param adminPrincipalId string
param adminPrincipalName string
@description('The bot\'s role: the migration job creates it for the bot identity\'s object id.')
param botRoleName string

resource server 'Microsoft.DBforPostgreSQL/flexibleServers@2024-08-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: 'Standard_B1ms'
    tier: 'Burstable'
  }
  properties: {
    version: '16'
    storage: {
      storageSizeGB: 32
    }
    backup: {
      backupRetentionDays: 7
      geoRedundantBackup: 'Disabled'
    }
    highAvailability: {
      mode: 'Disabled'
    }
    authConfig: {
      activeDirectoryAuth: 'Enabled'
      passwordAuth: 'Disabled'
      tenantId: tenant().tenantId
    }
    network: {
      publicNetworkAccess: 'Disabled'
    }
  }
}

resource admin 'Microsoft.DBforPostgreSQL/flexibleServers/administrators@2024-08-01' = {
  parent: server
  name: adminPrincipalId
  properties: {
    principalType: 'ServicePrincipal'
    principalName: adminPrincipalName
    tenantId: tenant().tenantId
  }
}

resource database 'Microsoft.DBforPostgreSQL/flexibleServers/databases@2024-08-01' = {
  parent: server
  name: databaseName
  properties: {
    charset: 'UTF8'
    collation: 'en_US.utf8'
  }
  // One change at a time: the server refuses an administrator and a database at once.
  dependsOn: [
    admin
  ]
}

var host = server.properties.fullyQualifiedDomainName

output name string = server.name
output id string = server.id
// No password in either: the user is a role, the password its identity's token (CRAG_POSTGRES_AUTH=entra).
output botUrl string = 'postgresql://${botRoleName}@${host}:5432/${database.name}?sslmode=require'
output migrationUrl string = 'postgresql://${adminPrincipalName}@${host}:5432/${database.name}?sslmode=require'
