#!/bin/sh
# Once, after the first `azd up`, run by an administrator who may grant Microsoft Graph application
# permissions and holds Sites.FullControl.All (docs/deploy.md, step 2): lets the indexing job's
# managed identity read the one SharePoint site named by AZURE_SHAREPOINT_SITE, and nothing else.
#   1. Graph's app role Sites.Selected on the identity (no site at all until step 2);
#   2. a fullcontrol grant on that site: the file permissions the job reads for access trimming are
#      complete only with it (docs/sharepoint.md, the permissions table).
# No client secret is made: the job gets its Graph token from its managed identity. Run again: it
# does nothing twice. The values come from azd's environment:
#   (set -a; eval "$(azd env get-values)"; deploy/azd/grant-graph-access.sh)
set -eu

principal="${AZURE_INDEX_PRINCIPAL_ID:?AZURE_INDEX_PRINCIPAL_ID is not set: run azd provision first, then export azd env get-values}"
client="${AZURE_INDEX_CLIENT_ID:?AZURE_INDEX_CLIENT_ID is not set: run azd provision first}"
site_url="${AZURE_SHAREPOINT_SITE:?AZURE_SHAREPOINT_SITE is not set: azd env set AZURE_SHAREPOINT_SITE https://<tenant>.sharepoint.com/sites/<site>}"
graph="https://graph.microsoft.com/v1.0"
# Microsoft Graph's own application id, the same in every tenant.
graph_app="00000003-0000-0000-c000-000000000000"

case "$site_url" in
  https://*.sharepoint.com/*) ;;
  *) echo "grant-graph-access: AZURE_SHAREPOINT_SITE must look like https://<tenant>.sharepoint.com/sites/<site>" >&2; exit 2 ;;
esac
rest="${site_url#https://}"
host="${rest%%/*}"
path="/${rest#*/}"
path="${path%/}"

graph_sp="$(az ad sp show --id "$graph_app" --query id -o tsv)"
role="$(az ad sp show --id "$graph_app" --query "appRoles[?value=='Sites.Selected'].id | [0]" -o tsv)"
held="$(az rest --method GET --uri "$graph/servicePrincipals/$principal/appRoleAssignments" \
  --query "length(value[?appRoleId=='$role'])" -o tsv)"
if [ "$held" = "0" ]; then
  az rest --method POST --uri "$graph/servicePrincipals/$principal/appRoleAssignments" \
    --headers "Content-Type=application/json" \
    --body "{\"principalId\": \"$principal\", \"resourceId\": \"$graph_sp\", \"appRoleId\": \"$role\"}" -o none
  echo "grant-graph-access: Sites.Selected given to the indexing identity"
else
  echo "grant-graph-access: the indexing identity already has Sites.Selected"
fi

site_id="$(az rest --method GET --uri "$graph/sites/$host:$path" --query id -o tsv)"
granted="$(az rest --method GET --uri "$graph/sites/$site_id/permissions" \
  --query "length(value[?grantedToIdentitiesV2[?application.id=='$client']])" -o tsv)"
if [ "$granted" = "0" ]; then
  az rest --method POST --uri "$graph/sites/$site_id/permissions" \
    --headers "Content-Type=application/json" \
    --body "{\"roles\": [\"fullcontrol\"], \"grantedToIdentities\": [{\"application\": {\"id\": \"$client\", \"displayName\": \"crag indexing job\"}}]}" -o none
  echo "grant-graph-access: $site_url granted to the indexing identity (fullcontrol)"
else
  echo "grant-graph-access: $site_url was already granted to the indexing identity"
fi
