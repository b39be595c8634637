// The image the Container App runs after this deployment. azd deploys images outside of Bicep
// (`azd deploy` makes a new revision), so a later `azd provision` must not put the placeholder back:
// once the app exists, its current image is kept. A module of its own, because an `existing`
// reference and the app's own declaration cannot share one template.
param exists bool
param name string

// Served until the first `azd deploy`: a small public web page on port 80 (containerapp.bicep
// points the ingress there and leaves the bot's health probes out while it runs).
var placeholderImage = 'mcr.microsoft.com/azuredocs/containerapps-helloworld:latest'

resource app 'Microsoft.App/containerApps@2024-03-01' existing = if (exists) {
  name: name
}

output image string = exists ? app!.properties.template.containers[0].image : placeholderImage
output placeholder bool = !exists
