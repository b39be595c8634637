// The answer cache shared by every replica (CRAG_CACHE_URL). Azure Managed Redis, the successor
// Microsoft names for Azure Cache for Redis. Without high
// availability: the cache is never needed to answer (a failed call is a miss), so a second node
// would double the price for nothing the users would notice. Keyless: Entra authentication only.
param name string
param location string
param tags object
param keyVaultName string
@description('usePrivateEndpoint: reached only through its private endpoint, public access off.')
param privateOnly bool
@description('The bot identity: its object id is its Redis user, an Entra token its password.')
param botPrincipalId string

resource cluster 'Microsoft.Cache/redisEnterprise@2025-07-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: 'Balanced_B0'
  }
  properties: {
    minimumTlsVersion: '1.2'
    highAvailability: 'Disabled'
    publicNetworkAccess: privateOnly ? 'Disabled' : 'Enabled'
  }
}

resource database 'Microsoft.Cache/redisEnterprise/databases@2025-07-01' = {
  parent: cluster
  name: 'default'
  properties: {
    clientProtocol: 'Encrypted'
    port: 10000
    // One endpoint that plain (non-cluster) clients can use, as the bot's redis.asyncio client is.
    clusteringPolicy: 'EnterpriseCluster'
    // docs/operations.md: answers carry a TTL, so evict the least recently used of those first.
    evictionPolicy: 'VolatileLRU'
    // Keyless: Entra authentication only (CRAG_REDIS_AUTH=entra).
    accessKeysAuthentication: 'Disabled'
  }
}

// The bot's identity as a user of the database's default access policy (data commands only).
resource botAccess 'Microsoft.Cache/redisEnterprise/databases/accessPolicyAssignments@2025-07-01' = {
  parent: database
  name: 'bot'
  properties: {
    accessPolicyName: 'default'
    user: {
      objectId: botPrincipalId
    }
  }
}

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

// rediss:// (TLS); the key is percent-encoded because base64 keys may hold '/' and '+', which a URL
// password may not carry as they are.
resource url 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'redis-url'
  dependsOn: [
    botAccess
  ]
  properties: {
    // No password in it: the user is the identity, the password a token (crag/outbound/redis_connect.py).
    value: 'rediss://${botPrincipalId}@${cluster.properties.hostName}:${database.properties.port}/0'
  }
}

output name string = cluster.name
output id string = cluster.id
output urlSecretName string = url.name
