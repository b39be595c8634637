// The bot in Azure: a Container App running the image built from ./Dockerfile, an Azure Bot with the
// Teams channel whose identity is a user-assigned managed identity, and the services the bot's
// settings name (docs/settings.md). Deployed by `azd provision` / `azd up` (azure.yaml), and by
// `atk provision` through azd (m365agents.yml). docs/deploy.md walks through it.
//
// Subscription scope so that azd creates the resource group itself (azd's usual layout): one
// environment name, one resource group, names derived from both.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('azd environment name: names the resource group and seeds every resource name.')
param environmentName string

@minLength(1)
@description('Region of every resource except the Azure Bot (global) and, optionally, Azure OpenAI.')
param location string

@description('Object id of whoever runs the deployment: may read the generated secrets back (azd needs that to keep the link secret stable). Empty: no such grant.')
param principalId string = ''

@allowed(['User', 'ServicePrincipal'])
@description('Kind of principalId: User from a laptop, ServicePrincipal from a pipeline.')
param principalType string = 'User'

@description('Whether the Container App exists already (azd sets SERVICE_BOT_RESOURCE_EXISTS): its running image is then kept instead of the placeholder.')
param botExists bool = false

@maxLength(30)
@description('BOT_NAME: the name in the welcome and help texts, on the Azure Bot and in the Teams app.')
param botName string = 'CRAG Assistant'

@description('PORT the bot listens on inside the container; the ingress and the health probes use it.')
param botPort int = 3978

@minValue(0)
@maxValue(30)
@description('At least one replica: a Teams message must be answered within seconds, longer than a cold start allows.')
param minReplicas int = 1

@minValue(1)
@maxValue(30)
param maxReplicas int = 3

@description('vCPU per replica (Container Apps consumption pairs: 0.5/1Gi, 1.0/2Gi, 2.0/4Gi).')
param containerCpu string = '1.0'
param containerMemory string = '2Gi'

@allowed(['F0', 'S1'])
@description('Azure Bot pricing tier. Teams is a standard channel, free on both; S1 only pays for premium channels.')
param botServiceSku string = 'F0'

@description('Endpoint of an existing Azure OpenAI resource (https://NAME.openai.azure.com/). Empty: one is created here with the two deployments below. An existing one needs deployments named after chatModelName and embeddingModelName, and must grant the identity output as MICROSOFT_APP_ID the role Cognitive Services OpenAI User.')
param existingOpenAiEndpoint string = ''

@description('Region of the Azure OpenAI resource created here (empty: location): the models are not offered in every region.')
param openAiLocation string = ''

// Each deployment is named after its model (AZURE_OPENAI_DEPLOYMENT, AZURE_OPENAI_EMBEDDING_DEPLOYMENT).
// Model versions retire: `az cognitiveservices model list --location <region>` shows what is offered.
param chatModelName string = 'gpt-4.1-mini'
param chatModelVersion string = '2025-04-14'
param chatDeploymentSku string = 'GlobalStandard'
@description('Thousands of tokens per minute.')
param chatDeploymentCapacity int = 30

param embeddingModelName string = 'text-embedding-3-small'
param embeddingModelVersion string = '1'
param embeddingDeploymentSku string = 'Standard'
param embeddingDeploymentCapacity int = 30

@description('Endpoint of an existing Azure AI Search service (https://NAME.search.windows.net). Empty: a service is created here.')
param existingSearchEndpoint string = ''

@allowed(['basic', 'standard'])
param searchSku string = 'basic'

@description('AZURE_SEARCH_INDEX: the index crag-ingest --target azure fills.')
param searchIndexName string = 'crag-chunks'

@allowed(['keyword', 'vector', 'hybrid'])
@description('AZURE_SEARCH_MODE; vector and hybrid use the embedding deployment, at query and at ingest time alike.')
param searchMode string = 'hybrid'

@description('The bot\'s own PostgreSQL role (the migration job makes it for the bot identity; data rights on the feedback tables only).')
param postgresBotRole string = 'crag_bot'

@secure()
@description('CRAG_LINK_SECRET: signs document links. Without an app password (a managed identity has none) the bot would otherwise make a random one per process, and links would break across replicas and restarts.')
param linkSecret string

@secure()
@description('SERPAPI_API_KEY (optional): turns the web branch on.')
param serpApiKey string = ''

@description('CRAG_SHAREPOINT_SITE: the SharePoint site whose library the indexing job indexes (https://contoso.sharepoint.com/sites/hr). Empty: no indexing job.')
param sharePointSite string = ''
@description('CRAG_SHAREPOINT_DRIVE: its document library (empty: the site\'s default).')
param sharePointDrive string = ''
@description('CRAG_SHAREPOINT_FOLDER: only this folder of the library (empty: all of it).')
param sharePointFolder string = ''
@description('When the indexing job runs, as a cron expression in UTC (default: every hour, on the hour). It also runs on demand.')
param indexSchedule string = '0 * * * *'

@description('AZURE_USE_PRIVATE_ENDPOINT: Search, Storage, Redis, Azure OpenAI and Key Vault only through private endpoints in the network, their public access off (PostgreSQL is private in both modes).')
param usePrivateEndpoint bool = false

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName }
var createOpenAi = empty(existingOpenAiEndpoint)
var createSearch = empty(existingSearchEndpoint)

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: 'rg-${environmentName}'
  location: location
  tags: tags
}

module identity 'modules/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: 'id-bot-${resourceToken}'
    location: location
    tags: tags
  }
}

// The indexing job's identity: it alone writes the index (and embeds the documents to do so).
module indexIdentity 'modules/identity.bicep' = {
  name: 'identity-index'
  scope: rg
  params: {
    name: 'id-index-${resourceToken}'
    location: location
    tags: tags
  }
}

// The migration job's identity: the PostgreSQL server's Entra administrator, nothing else.
module migrateIdentity 'modules/identity.bicep' = {
  name: 'identity-migrate'
  scope: rg
  params: {
    name: 'id-migrate-${resourceToken}'
    location: location
    tags: tags
  }
}

module network 'modules/network.bicep' = {
  name: 'network'
  scope: rg
  params: {
    name: 'vnet-${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: 'log-${resourceToken}'
    appInsightsName: 'appi-${resourceToken}'
    location: location
    tags: tags
  }
}

module keyVault 'modules/keyvault.bicep' = {
  name: 'keyvault'
  scope: rg
  params: {
    name: 'kv-${resourceToken}'
    location: location
    tags: tags
    privateOnly: usePrivateEndpoint
    botPrincipalId: identity.outputs.principalId
    deployerPrincipalId: principalId
    deployerPrincipalType: principalType
    linkSecret: linkSecret
    serpApiKey: serpApiKey
    appInsightsName: monitoring.outputs.appInsightsName
    telemetryReaderPrincipalIds: [indexIdentity.outputs.principalId]
  }
}

module registry 'modules/registry.bicep' = {
  name: 'registry'
  scope: rg
  params: {
    name: 'cr${resourceToken}'
    location: location
    tags: tags
    pullPrincipalId: identity.outputs.principalId
    jobPullPrincipalIds: [migrateIdentity.outputs.principalId, indexIdentity.outputs.principalId]
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: 'st${resourceToken}'
    location: location
    tags: tags
    privateOnly: usePrivateEndpoint
    containerName: 'bot-state'
    botPrincipalId: identity.outputs.principalId
  }
}

module redis 'modules/redis.bicep' = {
  name: 'redis'
  scope: rg
  params: {
    name: 'redis-${resourceToken}'
    location: location
    tags: tags
    privateOnly: usePrivateEndpoint
    keyVaultName: keyVault.outputs.name
    botPrincipalId: identity.outputs.principalId
  }
}

module postgres 'modules/postgres.bicep' = {
  name: 'postgres'
  scope: rg
  params: {
    name: 'psql-${resourceToken}'
    location: location
    tags: tags
    databaseName: 'crag'
    adminPrincipalId: migrateIdentity.outputs.principalId
    adminPrincipalName: migrateIdentity.outputs.name
    botRoleName: postgresBotRole
  }
}

module postgresEndpoint 'modules/private-endpoint.bicep' = {
  name: 'pe-postgres'
  scope: rg
  params: {
    name: 'pe-psql-${resourceToken}'
    location: location
    tags: tags
    vnetId: network.outputs.id
    subnetId: network.outputs.endpointsSubnetId
    targetId: postgres.outputs.id
    groupId: 'postgresqlServer'
    dnsZoneName: 'privatelink.postgres.database.azure.com'
  }
}

module openAi 'modules/openai.bicep' = if (createOpenAi) {
  name: 'openai'
  scope: rg
  params: {
    name: 'oai-${resourceToken}'
    location: empty(openAiLocation) ? location : openAiLocation
    tags: tags
    privateOnly: usePrivateEndpoint
    chatModelName: chatModelName
    chatModelVersion: chatModelVersion
    chatDeploymentSku: chatDeploymentSku
    chatDeploymentCapacity: chatDeploymentCapacity
    embeddingModelName: embeddingModelName
    embeddingModelVersion: embeddingModelVersion
    embeddingDeploymentSku: embeddingDeploymentSku
    embeddingDeploymentCapacity: embeddingDeploymentCapacity
    botPrincipalId: identity.outputs.principalId
    indexerPrincipalId: indexIdentity.outputs.principalId
  }
}

module search 'modules/search.bicep' = {
  name: 'search'
  scope: rg
  params: {
    create: createSearch
    name: 'srch-${resourceToken}'
    location: location
    tags: tags
    privateOnly: usePrivateEndpoint
    sku: searchSku
    botPrincipalId: identity.outputs.principalId
    indexerPrincipalId: indexIdentity.outputs.principalId
  }
}

// usePrivateEndpoint: each data service the bot calls is reached only through its endpoint in the
// network (their public access is off in their modules). An existing Azure OpenAI or AI Search
// (EXISTING_*) is yours to make private.
module searchEndpoint 'modules/private-endpoint.bicep' = if (usePrivateEndpoint && createSearch) {
  name: 'pe-search'
  scope: rg
  params: {
    name: 'pe-search-${resourceToken}'
    location: location
    tags: tags
    vnetId: network.outputs.id
    subnetId: network.outputs.endpointsSubnetId
    targetId: search.outputs.id
    groupId: 'searchService'
    dnsZoneName: 'privatelink.search.windows.net'
  }
}

module blobEndpoint 'modules/private-endpoint.bicep' = if (usePrivateEndpoint) {
  name: 'pe-blob'
  scope: rg
  params: {
    name: 'pe-blob-${resourceToken}'
    location: location
    tags: tags
    vnetId: network.outputs.id
    subnetId: network.outputs.endpointsSubnetId
    targetId: storage.outputs.id
    groupId: 'blob'
    dnsZoneName: 'privatelink.blob.${environment().suffixes.storage}'
  }
}

module redisEndpoint 'modules/private-endpoint.bicep' = if (usePrivateEndpoint) {
  name: 'pe-redis'
  scope: rg
  params: {
    name: 'pe-redis-${resourceToken}'
    location: location
    tags: tags
    vnetId: network.outputs.id
    subnetId: network.outputs.endpointsSubnetId
    targetId: redis.outputs.id
    groupId: 'redisEnterprise'
    dnsZoneName: 'privatelink.redis.azure.net'
  }
}

module openAiEndpointPrivate 'modules/private-endpoint.bicep' = if (usePrivateEndpoint && createOpenAi) {
  name: 'pe-openai'
  scope: rg
  params: {
    name: 'pe-openai-${resourceToken}'
    location: location
    tags: tags
    vnetId: network.outputs.id
    subnetId: network.outputs.endpointsSubnetId
    targetId: openAi!.outputs.id
    groupId: 'account'
    dnsZoneName: 'privatelink.openai.azure.com'
  }
}

module keyVaultEndpoint 'modules/private-endpoint.bicep' = if (usePrivateEndpoint) {
  name: 'pe-vault'
  scope: rg
  params: {
    name: 'pe-vault-${resourceToken}'
    location: location
    tags: tags
    vnetId: network.outputs.id
    subnetId: network.outputs.endpointsSubnetId
    targetId: keyVault.outputs.id
    groupId: 'vault'
    dnsZoneName: 'privatelink.vaultcore.azure.net'
  }
}

var openAiEndpoint = createOpenAi ? openAi!.outputs.endpoint : existingOpenAiEndpoint
var searchEndpoint = createSearch ? search.outputs.endpoint : existingSearchEndpoint

module botImage 'modules/app-image.bicep' = {
  name: 'bot-image'
  scope: rg
  params: {
    exists: botExists
    name: 'ca-bot-${resourceToken}'
  }
}

module app 'modules/containerapp.bicep' = {
  name: 'containerapp'
  scope: rg
  params: {
    environmentName: 'cae-${resourceToken}'
    appName: 'ca-bot-${resourceToken}'
    location: location
    tags: tags
    logAnalyticsName: monitoring.outputs.logAnalyticsName
    identityName: identity.outputs.name
    // Taking these outputs also orders the app after the modules that grant the identity AcrPull and
    // Key Vault Secrets User: the first revision pulls the image and reads its secrets at once.
    registryServer: registry.outputs.loginServer
    image: botImage.outputs.image
    isPlaceholder: botImage.outputs.placeholder
    port: botPort
    cpu: containerCpu
    memory: containerMemory
    minReplicas: minReplicas
    maxReplicas: maxReplicas
    keyVaultUri: keyVault.outputs.uri
    infrastructureSubnetId: network.outputs.appsSubnetId
    trustedProxies: network.outputs.appsPrefix
    // Each secret's module wrote it to the vault; naming it here also orders the app after it.
    secretNames: {
      redis: redis.outputs.urlSecretName
      appInsights: keyVault.outputs.appInsightsSecretName
      link: keyVault.outputs.linkSecretName
      serpApi: keyVault.outputs.serpApiSecretName
    }
    settings: {
      BOT_NAME: botName
      // The Bot Framework identity: the managed identity, no password (bot/channel/connector_cache.py gets
      // its tokens through botbuilder's managed-identity credentials).
      MicrosoftAppId: identity.outputs.clientId
      MicrosoftAppType: 'UserAssignedMSI'
      MicrosoftAppTenantId: identity.outputs.tenantId
      // Read by azure-identity, not by the bot's settings: which of the app's identities
      // DefaultAzureCredential uses for Azure OpenAI.
      AZURE_CLIENT_ID: identity.outputs.clientId
      AZURE_OPENAI_ENDPOINT: openAiEndpoint
      AZURE_OPENAI_DEPLOYMENT: chatModelName
      AZURE_OPENAI_EMBEDDING_DEPLOYMENT: embeddingModelName
      AZURE_SEARCH_ENDPOINT: searchEndpoint
      AZURE_SEARCH_INDEX: searchIndexName
      AZURE_SEARCH_MODE: searchMode
      AZURE_STORAGE_CONTAINER: storage.outputs.containerName
      // Keyless: Blob, Redis and Search (no key setting) with the identity's Entra tokens.
      AZURE_STORAGE_ACCOUNT_URL: storage.outputs.blobEndpoint
      CRAG_REDIS_AUTH: 'entra'
      // The bot's own role, no password; the schema is the migration job's (its role may not change it).
      CRAG_POSTGRES_URL: postgres.outputs.botUrl
      CRAG_POSTGRES_AUTH: 'entra'
      CRAG_POSTGRES_MIGRATE: 'false'    }
  }
  // The private endpoints' DNS records must exist before the first revision resolves the services
  // (and reads its Key Vault references, through the vault's endpoint in the private mode).
  dependsOn: [
    postgresEndpoint
    searchEndpoint
    blobEndpoint
    redisEndpoint
    openAiEndpointPrivate
    keyVaultEndpoint
  ]
}

// Brings the feedback schema up to date and makes the bot's role for the bot identity's object id.
// It is the PostgreSQL server's Entra administrator; started by azd's hooks (deploy/azd/start-jobs.sh)
// after each deploy, before the new bot writes.
module migrateJob 'modules/job.bicep' = {
  name: 'job-migrate'
  scope: rg
  params: {
    name: 'job-migrate-${resourceToken}'
    location: location
    tags: tags
    environmentId: app.outputs.environmentId
    identityName: migrateIdentity.outputs.name
    registryServer: registry.outputs.loginServer
    image: botImage.outputs.image
    command: [
      'crag-feedback'
      '--store'
      'postgres'
      'migrate'
      '--grant'
      postgresBotRole
      '--object-id'
      identity.outputs.principalId
    ]
    cpu: '0.5'
    memory: '1Gi'
    timeoutSeconds: 600
    settings: {
      CRAG_POSTGRES_URL: postgres.outputs.migrationUrl
      CRAG_POSTGRES_AUTH: 'entra'
    }
  }
  // The endpoint's DNS record must exist before the job resolves the server's name.
  dependsOn: [
    postgresEndpoint
  ]
}

module bot 'modules/bot.bicep' = {
  name: 'bot'
  scope: rg
  params: {
    name: 'bot-${resourceToken}'
    displayName: botName
    sku: botServiceSku
    endpoint: 'https://${app.outputs.fqdn}/api/messages'
    identityName: identity.outputs.name
  }
}

// azd writes these into .azure/<environment>/.env; m365agents.yml copies MICROSOFT_APP_ID and
// PUBLIC_HOST into the Teams app manifest; docs/deploy.md reads the rest (no secret among them).
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_CONTAINER_REGISTRY_ENDPOINT string = registry.outputs.loginServer
output AZURE_CONTAINER_REGISTRY_NAME string = registry.outputs.name
output AZURE_CONTAINER_ENVIRONMENT_NAME string = app.outputs.environmentName
output AZURE_KEY_VAULT_NAME string = keyVault.outputs.name
output SERVICE_BOT_NAME string = app.outputs.name
output AZURE_BOT_NAME string = bot.outputs.name
output MICROSOFT_APP_ID string = identity.outputs.clientId
output MICROSOFT_APP_TENANT_ID string = identity.outputs.tenantId
output PUBLIC_HOST string = app.outputs.fqdn
output PUBLIC_BASE_URL string = 'https://${app.outputs.fqdn}'
output BOT_NAME string = botName
output AZURE_OPENAI_ENDPOINT string = openAiEndpoint
output AZURE_OPENAI_DEPLOYMENT string = chatModelName
output AZURE_OPENAI_EMBEDDING_DEPLOYMENT string = embeddingModelName
output AZURE_SEARCH_ENDPOINT string = searchEndpoint
output AZURE_SEARCH_SERVICE_NAME string = createSearch ? search.outputs.name : ''
output AZURE_SEARCH_INDEX string = searchIndexName
output AZURE_SEARCH_MODE string = searchMode
// Fills AI Search from the SharePoint library, every hour and on demand, as its own identity: the
// bot's identity can only query the index. Its log lines and exit status go to the environment's
// Log Analytics workspace, which Application Insights is based on; its traces to Application
// Insights itself (the connection string, the one secret it may read).
module indexJob 'modules/job.bicep' = if (!empty(sharePointSite)) {
  name: 'job-index'
  scope: rg
  params: {
    name: 'job-index-${resourceToken}'
    location: location
    tags: tags
    environmentId: app.outputs.environmentId
    identityName: indexIdentity.outputs.name
    registryServer: registry.outputs.loginServer
    image: botImage.outputs.image
    command: ['crag-ingest', '--source', 'sharepoint', '--target', 'azure']
    cronExpression: indexSchedule
    keyVaultUri: keyVault.outputs.uri
    secretSettings: {
      APPLICATIONINSIGHTS_CONNECTION_STRING: keyVault.outputs.appInsightsSecretName
    }
    settings: {
      AZURE_OPENAI_ENDPOINT: openAiEndpoint
      AZURE_OPENAI_EMBEDDING_DEPLOYMENT: embeddingModelName
      AZURE_SEARCH_ENDPOINT: searchEndpoint
      AZURE_SEARCH_INDEX: searchIndexName
      AZURE_SEARCH_MODE: searchMode
      CRAG_SHAREPOINT_SITE: sharePointSite
      CRAG_SHAREPOINT_DRIVE: sharePointDrive
      CRAG_SHAREPOINT_FOLDER: sharePointFolder
      // Graph as the job's own identity: its app role and the site grant are given once by an
      // admin (deploy/azd/grant-graph-access.sh); no client secret exists.
      GRAPH_AUTH: 'managed_identity'
      // Where cited files of a folder source open: the bot's signed /docs links (SharePoint files
      // open at their own web URL, trimmed by access as today).
      CRAG_DOCS_BASE_URL: app.outputs.docsBaseUrl
      OTEL_SERVICE_NAME: 'crag-ingest'
    }
  }
}

output POSTGRES_SERVER_NAME string = postgres.outputs.name
output AZURE_MIGRATE_JOB_NAME string = migrateJob.outputs.name
output AZURE_INDEX_JOB_NAME string = empty(sharePointSite) ? '' : indexJob!.outputs.name
// deploy/azd/grant-graph-access.sh gives this identity Graph's Sites.Selected and the site.
output AZURE_INDEX_PRINCIPAL_ID string = indexIdentity.outputs.principalId
output AZURE_INDEX_CLIENT_ID string = indexIdentity.outputs.clientId
output AZURE_SHAREPOINT_SITE string = sharePointSite
output REDIS_NAME string = redis.outputs.name
output APPLICATIONINSIGHTS_NAME string = monitoring.outputs.appInsightsName
