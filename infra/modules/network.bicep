// The virtual network the Container Apps environment lives in, with a subnet for private endpoints.
// Created in both network modes: PostgreSQL is always reached through its private endpoint, because a
// consumption Container App has no fixed outbound address a firewall rule could name, and the only
// public alternative (the firewall rule that admits all of Azure) would admit every tenant's workloads.
// With usePrivateEndpoint the other data services get endpoints here too (main.bicep).
param name string
param location string
param tags object

// The environment's infrastructure subnet: a /23 at least for a workload-profiles environment, and
// delegated to Container Apps. Its ingress (the proxy that fronts the bot) runs here, so this range,
// and nothing wider, is what the bot trusts X-Forwarded-For from.
var appsPrefix = '10.40.0.0/23'
var endpointsPrefix = '10.40.2.0/24'

resource vnet 'Microsoft.Network/virtualNetworks@2024-05-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: ['10.40.0.0/16']
    }
    subnets: [
      {
        name: 'apps'
        properties: {
          addressPrefix: appsPrefix
          delegations: [
            {
              name: 'containerapps'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
        }
      }
      {
        name: 'endpoints'
        properties: {
          addressPrefix: endpointsPrefix
          privateEndpointNetworkPolicies: 'Disabled'
        }
      }
    ]
  }
}

output id string = vnet.id
output appsSubnetId string = vnet.properties.subnets[0].id
output endpointsSubnetId string = vnet.properties.subnets[1].id
output appsPrefix string = appsPrefix
