// The Azure Bot: the Teams channel and the messaging endpoint, with the bot's user-assigned managed
// identity as its app id (msaAppType UserAssignedMSI). botbuilder 4.17 supports that type
// (MicrosoftAppType=UserAssignedMSI: tokens from the managed identity, no client secret). A
// managed-identity bot is single-tenant: Teams users of this tenant only.
param name string
param displayName string
@allowed(['F0', 'S1'])
param sku string
param endpoint string
param identityName string

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' existing = {
  name: identityName
}

resource bot 'Microsoft.BotService/botServices@2022-09-15' = {
  name: name
  location: 'global'
  kind: 'azurebot'
  sku: {
    name: sku
  }
  properties: {
    displayName: displayName
    endpoint: endpoint
    msaAppId: identity.properties.clientId
    msaAppType: 'UserAssignedMSI'
    msaAppMSIResourceId: identity.id
    msaAppTenantId: identity.properties.tenantId
  }
}

resource teams 'Microsoft.BotService/botServices/channels@2022-09-15' = {
  parent: bot
  name: 'MsTeamsChannel'
  location: 'global'
  properties: {
    channelName: 'MsTeamsChannel'
    properties: {
      isEnabled: true
    }
  }
}

output name string = bot.name
