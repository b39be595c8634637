// A Container Apps job in the bot's environment, running the bot's image with another command under
// its own identity: the migration job (the schema and the bot's database role) and the indexing job
// (crag-ingest into AI Search). Each identity holds only the roles its job needs (main.bicep), so the
// bot never can write the index or change the schema. Started on demand (`az containerapp job start`,
// as azd's hook does: deploy/azd/start-jobs.sh) and, with a cron expression, on a schedule too.
param name string
param location string
param tags object
param environmentId string
param identityName string
param registryServer string
param image string
param command array
@description('Empty: on demand only; otherwise a cron expression in UTC (a scheduled job can still be started on demand).')
param cronExpression string = ''
param cpu string = '1.0'
param memory string = '2Gi'
@description('Seconds a run may take before it is stopped and counted as failed.')
param timeoutSeconds int = 3600
param keyVaultUri string = ''
@description('Key Vault secret names by environment variable (read with the job\'s identity).')
param secretSettings object = {}
@description('Plain settings: environment variable name to value.')
param settings object

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' existing = {
  name: identityName
}

var schedule = { cronExpression: cronExpression, parallelism: 1, replicaCompletionCount: 1 }
var secrets = map(items(secretSettings), s => { env: s.key, secret: s.value })

resource job 'Microsoft.App/jobs@2024-03-01' = {
  name: name
  location: location
  tags: tags
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identity.id}': {}
    }
  }
  properties: {
    environmentId: environmentId
    workloadProfileName: 'Consumption'
    configuration: {
      triggerType: empty(cronExpression) ? 'Manual' : 'Schedule'
      manualTriggerConfig: empty(cronExpression) ? { parallelism: 1, replicaCompletionCount: 1 } : null
      scheduleTriggerConfig: empty(cronExpression) ? null : schedule
      replicaTimeout: timeoutSeconds
      // One retry: a transient failure (a token, a restart) is retried; a bug fails the run and shows.
      replicaRetryLimit: 1
      registries: [
        {
          server: registryServer
          identity: identity.id
        }
      ]
      secrets: map(secrets, s => {
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
          command: command
          resources: {
            cpu: json(cpu)
            memory: memory
          }
          env: concat(
            [{ name: 'AZURE_CLIENT_ID', value: identity.properties.clientId }],
            map(items(settings), s => { name: s.key, value: s.value }),
            map(secrets, s => { name: s.env, secretRef: s.secret })
          )
        }
      ]
    }
  }
}

output name string = job.name
