#!/bin/sh
# azd's postprovision and postdeploy hook (azure.yaml): the jobs run the image the bot runs, so give
# them that image, run the migration job and wait for it (the bot's role and the schema the new
# release writes), then start the indexing job once (later runs: its hourly schedule). azd passes
# its environment's values (infra/main.bicep's outputs) as environment variables.
set -eu

rg="${AZURE_RESOURCE_GROUP:?run through azd: AZURE_RESOURCE_GROUP is not set}"
app="${SERVICE_BOT_NAME:?run through azd: SERVICE_BOT_NAME is not set}"
migrate="${AZURE_MIGRATE_JOB_NAME:?AZURE_MIGRATE_JOB_NAME is not set: run azd provision first}"
index="${AZURE_INDEX_JOB_NAME:-}"
# infra/modules/app-image.bicep's page, served until the first azd deploy.
placeholder="mcr.microsoft.com/azuredocs/containerapps-helloworld:latest"
poll="${CRAG_JOB_POLL_SECONDS:-10}"
tries="${CRAG_JOB_POLL_TRIES:-90}"

image="$(az containerapp show -n "$app" -g "$rg" --query "properties.template.containers[0].image" -o tsv)"
if [ "$image" = "$placeholder" ]; then
  echo "start-jobs: the bot's image is not deployed yet; the jobs start after azd deploy"
  exit 0
fi

for job in "$migrate" $index; do
  az containerapp job update -n "$job" -g "$rg" --image "$image" -o none
done

execution="$(az containerapp job start -n "$migrate" -g "$rg" --query name -o tsv)"
echo "start-jobs: migration $execution started"
n=0
while :; do
  status="$(az containerapp job execution show -n "$migrate" -g "$rg" --job-execution-name "$execution" --query properties.status -o tsv)"
  case "$status" in
    Succeeded) echo "start-jobs: migration $execution succeeded"; break ;;
    Failed | Stopped | Degraded)
      echo "start-jobs: migration $execution $status; its log: az containerapp job logs show -n $migrate -g $rg --execution $execution" >&2
      exit 1 ;;
  esac
  n=$((n + 1))
  if [ "$n" -ge "$tries" ]; then
    echo "start-jobs: migration $execution still $status after $((poll * tries)) s; see az containerapp job execution list -n $migrate -g $rg" >&2
    exit 1
  fi
  sleep "$poll"
done

if [ -n "$index" ]; then
  execution="$(az containerapp job start -n "$index" -g "$rg" --query name -o tsv)"
  echo "start-jobs: indexing $execution started (az containerapp job execution list -n $index -g $rg)"
else
  echo "start-jobs: no indexing job (AZURE_SHAREPOINT_SITE is not set)"
fi
