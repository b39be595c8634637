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
@description('The indexing job\'s identity: it alone writes the index and its definition. Empty: none.')
param indexerPrincipalId string = ''

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

// The indexing job (crag-ingest) creates the index if missing (Search Service Contributor: index
// definitions, not keys) and writes its documents (Search Index Data Contributor). The bot has neither.
var indexDataContributor = '8ebe5a00-799e-43f5-93ac-243d3dce952c'
var serviceContributor = '7ca78c08-252a-4471-8644-bb5ff32d4ba0'

resource indexerWrites 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (create && !empty(indexerPrincipalId)) {
  scope: service
  name: guid(name, indexerPrincipalId, indexDataContributor)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', indexDataContributor)
    principalId: indexerPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource indexerDefines 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (create && !empty(indexerPrincipalId)) {
  scope: service
  name: guid(name, indexerPrincipalId, serviceContributor)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceContributor)
    principalId: indexerPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output name string = create ? service!.name : ''
output id string = create ? service!.id : ''
output endpoint string = create ? 'https://${service!.name}.search.windows.net' : ''
