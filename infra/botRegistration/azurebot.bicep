// The Azure Bot for local debugging (m365agents.local.yml): the bot runs on the developer's machine
// behind a dev tunnel, as a single-tenant Entra app (Azure creates no new multi-tenant bots, and a
// laptop has no managed identity). Resource-group scope: the toolkit deploys it with arm/deploy.
@maxLength(64)
param name string
param displayName string
@description('The single-tenant Entra app the toolkit created (aadApp/create, AzureADMyOrg).')
param appId string
param tenantId string
@description('https://<tunnel host>/api/messages')
param endpoint string

resource bot 'Microsoft.BotService/botServices@2022-09-15' = {
  name: name
  location: 'global'
  kind: 'azurebot'
  sku: {
    name: 'F0'
  }
  properties: {
    displayName: displayName
    endpoint: endpoint
    msaAppId: appId
    msaAppType: 'SingleTenant'
    msaAppTenantId: tenantId
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
