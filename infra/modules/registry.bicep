// The registry azd pushes the bot's image to. The bot's identity pulls with AcrPull, so the admin
// user (a shared password) stays off.
param name string
param location string
param tags object
@description('The bot identity.')
param pullPrincipalId string
@description('The jobs\' identities (modules/job.bicep): they run the same image.')
param jobPullPrincipalIds array = []

var acrPullRoleId = '7f951dda-4ed3-4680-a7ca-43fe172d538d'

resource registry 'Microsoft.ContainerRegistry/registries@2023-07-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: 'Basic'
  }
  properties: {
    adminUserEnabled: false
  }
}

resource pull 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(registry.id, pullPrincipalId, acrPullRoleId)
  scope: registry
  properties: {
    principalId: pullPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', acrPullRoleId)
  }
}

resource jobPull 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for principalId in jobPullPrincipalIds: {
    name: guid(registry.id, principalId, acrPullRoleId)
    scope: registry
    properties: {
      principalId: principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', acrPullRoleId)
    }
  }
]

output name string = registry.name
output loginServer string = registry.properties.loginServer
