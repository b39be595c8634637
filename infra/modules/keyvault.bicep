// The vault for what has no Entra path (the SerpAPI key, the link secret, Application Insights'
// connection string): the Container App reads them as Key Vault references with the bot's identity,
// so no secret is written into the app's definition.
// RBAC, not access policies: the same role assignments as every other resource here.
param name string
param location string
param tags object
@description('usePrivateEndpoint: reached only through its private endpoint, public access off.')
param privateOnly bool
param botPrincipalId string
param deployerPrincipalId string
@allowed(['User', 'ServicePrincipal'])
param deployerPrincipalType string
@secure()
param linkSecret string
@secure()
param serpApiKey string
param appInsightsName string
@description('The jobs\' identities: each may read Application Insights\' connection string, and only that secret.')
param telemetryReaderPrincipalIds array = []

var secretsUserRoleId = '4633458b-17de-408a-b874-0445c86b69e6'
var secretsOfficerRoleId = 'b86a8fe4-44ce-4948-aee5-eccb2c155cd7'

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: tenant().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    // The shortest allowed: `azd down --purge` frees the name at once; without --purge a deleted
    // vault keeps its name this long.
    softDeleteRetentionInDays: 7
    publicNetworkAccess: privateOnly ? 'Disabled' : 'Enabled'
    networkAcls: {
      defaultAction: privateOnly ? 'Deny' : 'Allow'
      bypass: 'None'
    }
  }
}

resource botReadsSecrets 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, botPrincipalId, secretsUserRoleId)
  scope: vault
  properties: {
    principalId: botPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', secretsUserRoleId)
  }
}

// azd reads the link secret back from here on the next provision (main.parameters.json); without
// this it would be a new random value each time, and links already sent would stop opening.
resource deployerManagesSecrets 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(deployerPrincipalId)) {
  name: guid(vault.id, deployerPrincipalId, secretsOfficerRoleId)
  scope: vault
  properties: {
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', secretsOfficerRoleId)
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

// The bot's settings treat the connection string as a secret: it lets anyone write into the resource.
resource appInsightsSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'appinsights-connection-string'
  properties: {
    value: appInsights.properties.ConnectionString
  }
}

// Scoped to the one secret, not the vault: a job sees nothing else kept here.
resource jobsReadTelemetry 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for principalId in telemetryReaderPrincipalIds: {
    name: guid(appInsightsSecret.id, principalId, secretsUserRoleId)
    scope: appInsightsSecret
    properties: {
      principalId: principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', secretsUserRoleId)
    }
  }
]

resource linkSecretValue 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'link-secret'
  properties: {
    value: linkSecret
  }
}

resource serpApiSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = if (!empty(serpApiKey)) {
  parent: vault
  name: 'serpapi-api-key'
  properties: {
    value: serpApiKey
  }
}

output name string = vault.name
output id string = vault.id
output uri string = vault.properties.vaultUri
output appInsightsSecretName string = appInsightsSecret.name
output linkSecretName string = linkSecretValue.name
// Empty when no key was given: the app then sets no SERPAPI_API_KEY and web search stays off.
output serpApiSecretName string = empty(serpApiKey) ? '' : 'serpapi-api-key'
