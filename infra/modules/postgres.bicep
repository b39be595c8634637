// The answers and ratings store shared by every replica (CRAG_FEEDBACK_STORE=postgres). The bot
// connects with a password in its DSN (asyncpg, no Entra ID token), so password authentication is on
// and the DSN goes to the vault.
param name string
param location string
param tags object
param adminLogin string
@secure()
param adminPassword string
param databaseName string
param keyVaultName string

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
    administratorLogin: adminLogin
    administratorLoginPassword: adminPassword
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
      activeDirectoryAuth: 'Disabled'
      passwordAuth: 'Enabled'
    }
    network: {
      publicNetworkAccess: 'Enabled'
    }
  }
}

// A consumption Container App has no fixed outbound address to allow, so the server admits
// connections from Azure (0.0.0.0, Azure's convention for that) and relies on TLS and the password.
// docs/deploy.md names the private-network alternative.
resource allowAzure 'Microsoft.DBforPostgreSQL/flexibleServers/firewallRules@2024-08-01' = {
  parent: server
  name: 'AllowAllAzureServicesAndResourcesWithinAzureIps'
  properties: {
    startIpAddress: '0.0.0.0'
    endIpAddress: '0.0.0.0'
  }
}

resource database 'Microsoft.DBforPostgreSQL/flexibleServers/databases@2024-08-01' = {
  parent: server
  name: databaseName
  properties: {
    charset: 'UTF8'
    collation: 'en_US.utf8'
  }
}

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

// Read back by main.parameters.json on the next provision, so the password stays the same.
resource password 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'postgres-admin-password'
  properties: {
    value: adminPassword
  }
}

resource url 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'postgres-url'
  properties: {
    value: 'postgresql://${adminLogin}:${uriComponent(adminPassword)}@${server.properties.fullyQualifiedDomainName}:5432/${database.name}?sslmode=require'
  }
  // The app waits for this secret: by then the firewall admits it.
  dependsOn: [
    allowAzure
  ]
}

output name string = server.name
output urlSecretName string = url.name
