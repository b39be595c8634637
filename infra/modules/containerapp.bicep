// The Container Apps environment and the bot's app: external HTTPS ingress on the bot's port, health
// probes on /api/health, one or more replicas, every secret a Key Vault reference read with the bot's
// identity. No volume: what must outlive a replica is in Blob (conversations), PostgreSQL (answers and
// ratings), Redis (the answer cache) and Azure AI Search (the index); data/ inside the container only
// holds what the image brings and per-replica scratch files.
param environmentName string
param appName string
param location string
param tags object
param logAnalyticsName string
param identityName string
param registryServer string
param image string
@description('Whether image is the placeholder page (port 80, no /api/health) rather than the bot.')
param isPlaceholder bool
param port int
param cpu string
param memory string
param minReplicas int
param maxReplicas int
param keyVaultUri string
@description('The environment\'s subnet (modules/network.bicep): the app reaches the private endpoints from it.')
param infrastructureSubnetId string
@description('CRAG_TRUSTED_PROXIES: the addresses of what fronts the app (the environment\'s ingress, in its subnet).')
param trustedProxies string
@description('Key Vault secret names by use; an empty name leaves that setting out.')
param secretNames object
@description('Plain settings (docs/settings.md names): environment variable name to value.')
param settings object

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2023-09-01' existing = {
  name: logAnalyticsName
}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' existing = {
  name: identityName
}

resource containerEnv 'Microsoft.App/managedEnvironments@2024-03-01' = {
  name: environmentName
  location: location
  tags: tags
  properties: {
    // In the network in both modes: PostgreSQL has no public access (modules/network.bicep). The
    // environment's ingress stays public (Teams and Web Chat reach it); what the app calls is private.
    vnetConfiguration: {
      infrastructureSubnetId: infrastructureSubnetId
      internal: false
    }
    appLogsConfiguration: {
      destination: 'log-analytics'
      logAnalyticsConfiguration: {
        customerId: logAnalytics.properties.customerId
        sharedKey: logAnalytics.listKeys().primarySharedKey
      }
    }
    workloadProfiles: [
      {
        name: 'Consumption'
        workloadProfileType: 'Consumption'
      }
    ]
  }
}

// Each setting that holds a key, a password or a connection string, and the vault secret it comes from.
var secretSettings = filter(
  [
    { env: 'CRAG_CACHE_URL', secret: secretNames.redis }
    { env: 'APPLICATIONINSIGHTS_CONNECTION_STRING', secret: secretNames.appInsights }
    { env: 'CRAG_LINK_SECRET', secret: secretNames.link }
    { env: 'SERPAPI_API_KEY', secret: secretNames.serpApi }
  ],
  s => !empty(s.secret)
)

// The app's own address: links to /docs/, the answer cache's key, the admin cookie's Secure flag.
var publicBaseUrl = 'https://${appName}.${containerEnv.properties.defaultDomain}'

var fixedSettings = [
  { name: 'PORT', value: string(port) }
  { name: 'PUBLIC_BASE_URL', value: publicBaseUrl }
  // The base of cited files' links, the same the indexing job writes into the index (main.bicep).
  { name: 'CRAG_DOCS_BASE_URL', value: '${publicBaseUrl}/docs' }
  // Several replicas share conversations (Blob) and ratings (PostgreSQL), signed in as the identity.
  { name: 'STATE_STORAGE', value: 'blob' }
  { name: 'CRAG_FEEDBACK_STORE', value: 'postgres' }
  // Requests reach the bot only through the environment's ingress proxy, which runs in the
  // environment's own subnet: its X-Forwarded-For names the client for the Web Chat token and admin
  // sign-in limits. Nothing else in the network may choose its client address.
  { name: 'CRAG_TRUSTED_PROXIES', value: trustedProxies }
]

var probes = [
  {
    // Up to 10 + 15 x 10 s for the first answer: the bot opens the engine before it reports ready.
    type: 'Startup'
    httpGet: {
      path: '/api/health'
      port: port
    }
    initialDelaySeconds: 10
    periodSeconds: 15
    failureThreshold: 10
    timeoutSeconds: 5
  }
  {
    type: 'Readiness'
    httpGet: {
      path: '/api/health'
      port: port
    }
    periodSeconds: 10
    failureThreshold: 3
    timeoutSeconds: 5
  }
  {
    type: 'Liveness'
    httpGet: {
      path: '/api/health'
      port: port
    }
    periodSeconds: 30
    failureThreshold: 5
    timeoutSeconds: 5
  }
]

resource app 'Microsoft.App/containerApps@2024-03-01' = {
  name: appName
  location: location
  // azd finds the app it deploys the `bot` service to by this tag.
  tags: union(tags, { 'azd-service-name': 'bot' })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identity.id}': {}
    }
  }
  properties: {
    managedEnvironmentId: containerEnv.id
    workloadProfileName: 'Consumption'
    configuration: {
      activeRevisionsMode: 'Single'
      ingress: {
        external: true
        targetPort: isPlaceholder ? 80 : port
        transport: 'auto'
        allowInsecure: false
      }
      registries: [
        {
          server: registryServer
          identity: identity.id
        }
      ]
      secrets: map(secretSettings, s => {
        name: s.secret
        keyVaultUrl: '${keyVaultUri}secrets/${s.secret}'
        identity: identity.id
      })
    }
    template: {
      containers: [
        {
          name: 'main'
          image: image
          resources: {
            cpu: json(cpu)
            memory: memory
          }
          env: concat(
            fixedSettings,
            map(items(settings), s => { name: s.key, value: s.value }),
            map(secretSettings, s => { name: s.env, secretRef: s.secret })
          )
          // The placeholder page has no /api/health.
          probes: isPlaceholder ? [] : probes
        }
      ]
      scale: {
        minReplicas: minReplicas
        maxReplicas: maxReplicas
        rules: [
          {
            name: 'http'
            http: {
              metadata: {
                concurrentRequests: '20'
              }
            }
          }
        ]
      }
    }
  }
}

output name string = app.name
output environmentName string = containerEnv.name
output environmentId string = containerEnv.id
output docsBaseUrl string = '${publicBaseUrl}/docs'
output fqdn string = app.properties.configuration.ingress.fqdn
