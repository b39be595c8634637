// Blob storage for the conversation state (STATE_STORAGE=blob) and the vector cache. Keyless: shared
// keys are off and the bot signs in with its identity (bot/state/blob_state.py, AZURE_STORAGE_ACCOUNT_URL).
param name string
param location string
param tags object
param containerName string
@description('usePrivateEndpoint: reached only through its private endpoint, public access off.')
param privateOnly bool
@description('The bot identity: Blob data access for its conversation state and the vector cache.')
param botPrincipalId string

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    allowBlobPublicAccess: false
    // Keyless: the account's shared keys are off; the bot signs in with its managed identity.
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    publicNetworkAccess: privateOnly ? 'Disabled' : 'Enabled'
    networkAcls: {
      defaultAction: privateOnly ? 'Deny' : 'Allow'
      bypass: 'None'
    }
  }
}

resource blobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: account
  name: 'default'
}

resource container 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobs
  name: containerName
  properties: {
    publicAccess: 'None'
  }
}

// Blob state is never swept by the bot (docs/operations.md): conversations untouched for 30 days
// are deleted here, as CRAG_STATE_TTL_DAYS does for the SQLite state.
resource lifecycle 'Microsoft.Storage/storageAccounts/managementPolicies@2023-05-01' = {
  parent: account
  name: 'default'
  properties: {
    policy: {
      rules: [
        {
          name: 'expire-bot-state'
          enabled: true
          type: 'Lifecycle'
          definition: {
            filters: {
              blobTypes: ['blockBlob']
              prefixMatch: ['${containerName}/']
            }
            actions: {
              baseBlob: {
                delete: {
                  daysAfterModificationGreaterThan: 30
                }
              }
            }
          }
        }
      ]
    }
  }
}

// Storage Blob Data Contributor: read and write blobs (conversation state, the vector cache), nothing
// of the account's settings or keys.
var blobDataContributor = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'

resource botBlobData 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: account
  name: guid(account.id, botPrincipalId, blobDataContributor)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', blobDataContributor)
    principalId: botPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output name string = account.name
output id string = account.id
output containerName string = container.name
output blobEndpoint string = account.properties.primaryEndpoints.blob
