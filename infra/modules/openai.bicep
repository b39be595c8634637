// Azure OpenAI with a chat and an embedding deployment. The bot calls it as its managed identity
// (no AZURE_OPENAI_API_KEY: crag/providers/llm uses DefaultAzureCredential), so key access is
// switched off altogether.
param name string
param location string
param tags object
param chatModelName string
param chatModelVersion string
param chatDeploymentSku string
param chatDeploymentCapacity int
param embeddingModelName string
param embeddingModelVersion string
param embeddingDeploymentSku string
param embeddingDeploymentCapacity int
@description('usePrivateEndpoint: reached only through its private endpoint, public access off.')
param privateOnly bool
param botPrincipalId string
@description('The indexing job\'s identity: it embeds the documents with the same deployment.')
param indexerPrincipalId string

var openAiUserRoleId = '5e0bd9bd-7b93-4f28-af87-19fc36ad61bd'

resource account 'Microsoft.CognitiveServices/accounts@2024-10-01' = {
  name: name
  location: location
  tags: tags
  kind: 'OpenAI'
  sku: {
    name: 'S0'
  }
  properties: {
    customSubDomainName: name
    publicNetworkAccess: privateOnly ? 'Disabled' : 'Enabled'
    networkAcls: {
      defaultAction: privateOnly ? 'Deny' : 'Allow'
    }
    disableLocalAuth: true
  }
}

resource chat 'Microsoft.CognitiveServices/accounts/deployments@2024-10-01' = {
  parent: account
  // Named after the model: the bot's AZURE_OPENAI_DEPLOYMENT.
  name: chatModelName
  sku: {
    name: chatDeploymentSku
    capacity: chatDeploymentCapacity
  }
  properties: {
    model: {
      format: 'OpenAI'
      name: chatModelName
      version: chatModelVersion
    }
  }
}

resource embedding 'Microsoft.CognitiveServices/accounts/deployments@2024-10-01' = {
  parent: account
  name: embeddingModelName
  sku: {
    name: embeddingDeploymentSku
    capacity: embeddingDeploymentCapacity
  }
  properties: {
    model: {
      format: 'OpenAI'
      name: embeddingModelName
      version: embeddingModelVersion
    }
  }
  // One deployment at a time: the account refuses concurrent changes.
  dependsOn: [
    chat
  ]
}

resource botCallsOpenAi 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, botPrincipalId, openAiUserRoleId)
  scope: account
  properties: {
    principalId: botPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', openAiUserRoleId)
  }
}

// The indexing job embeds the documents with the same deployment (hybrid mode).
resource indexerCallsOpenAi 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, indexerPrincipalId, openAiUserRoleId)
  scope: account
  properties: {
    principalId: indexerPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', openAiUserRoleId)
  }
}

output endpoint string = account.properties.endpoint
output name string = account.name
output id string = account.id
