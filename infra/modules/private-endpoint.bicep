// One service's private endpoint in the endpoints subnet, and the private DNS zone that makes the
// service's usual host name resolve to it inside the network (so the bot's settings stay the same
// in both network modes).
param name string
param location string
param tags object
param vnetId string
param subnetId string
@description('The resource the endpoint connects to.')
param targetId string
@description('The sub-resource of the target (blob, searchService, vault, account, ...).')
param groupId string
@description('The privatelink zone Azure documents for that sub-resource.')
param dnsZoneName string

resource zone 'Microsoft.Network/privateDnsZones@2024-06-01' = {
  name: dnsZoneName
  location: 'global'
  tags: tags
}

resource link 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = {
  parent: zone
  name: '${name}-link'
  location: 'global'
  tags: tags
  properties: {
    virtualNetwork: {
      id: vnetId
    }
    registrationEnabled: false
  }
}

resource endpoint 'Microsoft.Network/privateEndpoints@2024-05-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    subnet: {
      id: subnetId
    }
    privateLinkServiceConnections: [
      {
        name: name
        properties: {
          privateLinkServiceId: targetId
          groupIds: [groupId]
        }
      }
    ]
  }
}

resource zoneGroup 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = {
  parent: endpoint
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: replace(dnsZoneName, '.', '-')
        properties: {
          privateDnsZoneId: zone.id
        }
      }
    ]
  }
}

output id string = endpoint.id
