// Azure AI Search holds the index the bot answers from. Keyless: the bot queries with its identity's
// token (Search Index Data Reader); the indexing job writes with its own (Search Index Data
// Contributor, main.bicep), so the bot cannot change the index.
param create bool
param name string
param location string
param tags object
@allowed(['basic', 'standard'])
param sku string
@description('usePrivateEndpoint: reached only through its private endpoint, public access off.')
param privateOnly bool
@description('The bot identity: it only queries the index.')
param botPrincipalId string

resource service 'Microsoft.Search/searchServices@2023-11-01' = if (create) {
  name: name
  location: location
  tags: tags
  sku: {
    name: sku
  }
  properties: {
    replicaCount: 1
    partitionCount: 1
    hostingMode: 'default'
    publicNetworkAccess: privateOnly ? 'disabled' : 'enabled'
    // Keyless: Entra tokens only, no admin or query keys.
    disableLocalAuth: true
    // The semantic ranker's free plan, so AZURE_SEARCH_SEMANTIC=true can be tried at no cost.
    semanticSearch: 'free'
  }
}

// Search Index Data Reader: query the index, nothing else (no writes, no index definitions).
var indexDataReader = '1407120a-92aa-4202-b7e9-c0e197c71c8f'

resource botQuery 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (create) {
  scope: service
  name: guid(name, botPrincipalId, indexDataReader)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', indexDataReader)
    principalId: botPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output name string = create ? service!.name : ''
output id string = create ? service!.id : ''
output endpoint string = create ? 'https://${service!.name}.search.windows.net' : ''
