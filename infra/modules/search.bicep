// Azure AI Search holds the index the bot answers from. The bot's search provider takes an API key
// only (crag/config/azure_search.py: AZURE_SEARCH_API_KEY is required), so Entra ID roles would go
// unused: the bot gets a query key (read-only) through the vault. Indexing uses an admin key, which
// whoever runs crag-ingest fetches for themselves (docs/deploy.md).
param create bool
param name string
param location string
param tags object
@allowed(['basic', 'standard'])
param sku string
@secure()
param existingQueryKey string
param keyVaultName string

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
    publicNetworkAccess: 'enabled'
    // The semantic ranker's free plan, so AZURE_SEARCH_SEMANTIC=true can be tried at no cost.
    semanticSearch: 'free'
  }
}

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

resource queryKey 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'search-query-key'
  properties: {
    // A new service comes with one query key.
    value: create ? service!.listQueryKeys().value[0].key : existingQueryKey
  }
}

output name string = create ? service!.name : ''
output endpoint string = create ? 'https://${service!.name}.search.windows.net' : ''
output queryKeySecretName string = queryKey.name
