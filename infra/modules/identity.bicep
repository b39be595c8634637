// The bot's one identity: the Azure Bot's app id (msaAppType UserAssignedMSI), the Container App's
// identity for pulling its image and reading its Key Vault secrets, and the Entra ID identity the
// bot calls Azure OpenAI as (DefaultAzureCredential with AZURE_CLIENT_ID). No client secret exists
// to leak or expire.
param name string
param location string
param tags object

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: name
  location: location
  tags: tags
}

output name string = identity.name
output id string = identity.id
output clientId string = identity.properties.clientId
output principalId string = identity.properties.principalId
output tenantId string = identity.properties.tenantId
