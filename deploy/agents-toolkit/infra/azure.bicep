// teamsbot on Azure Container Apps, with its Azure Bot: the template the
// Agents Toolkit's provision step deploys (m365agents.yml, arm/deploy), and
// the one docs/azure.md deploys with az deployment group create.
//
// What it expects to exist already (docs/azure.md makes each): the bot's
// app registration with a certificate, a user-assigned managed identity
// that may pull the image and read the Key Vault's secrets, the Key Vault
// with the secrets below, and, for several replicas, the PostgreSQL
// Flexible Server whose URL is the secret database-url.

@description('A short name the resources are named after.')
param resourceBaseName string

@description('Where the resources go.')
param location string = resourceGroup().location

@description('The image deploy/image.sh pushed, with its tag: myregistry.azurecr.io/teamsbot:1.0.0.')
param image string

@description('The registry of the image, which the managed identity pulls from: myregistry.azurecr.io.')
param registryServer string

@description('The user-assigned managed identity (its name) that pulls the image and reads the Key Vault.')
param identityName string

@description('The Key Vault (its name) holding the secrets bot-certificate, oidc-client-secret, database-url, frame-token-keys, signin-cookie-key and mcp-token-key.')
param keyVaultName string

@description('The bot\'s app registration: its application id.')
param botAppId string

@description('The tenant of the bot and of the sign-in.')
param tenantId string

@description('The sign-in\'s app registration (its application id): the bot\'s own, or a second one.')
param signInClientId string = botAppId

@description('Replicas: one to ten, all on the PostgreSQL database of the secret database-url.')
@minValue(1)
@maxValue(10)
param replicas int = 2

var appName = '${resourceBaseName}-app'
var vault = 'https://${keyVaultName}${environment().suffixes.keyvaultDns}/secrets'

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' existing = {
  name: identityName
}

resource logs 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: '${resourceBaseName}-logs'
  location: location
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource apps 'Microsoft.App/managedEnvironments@2024-03-01' = {
  name: '${resourceBaseName}-env'
  location: location
  properties: {
    appLogsConfiguration: {
      destination: 'log-analytics'
      logAnalyticsConfiguration: {
        customerId: logs.properties.customerId
        sharedKey: logs.listKeys().primarySharedKey
      }
    }
  }
}

// Where people and Teams reach the service: the app's own host name in
// the environment's domain.
var publicBaseURL = 'https://${appName}.${apps.properties.defaultDomain}'

resource app 'Microsoft.App/containerApps@2024-03-01' = {
  name: appName
  location: location
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identity.id}': {}
    }
  }
  properties: {
    managedEnvironmentId: apps.id
    configuration: {
      activeRevisionsMode: 'Single'
      ingress: {
        external: true
        targetPort: 3978
        transport: 'http'
        allowInsecure: false
      }
      registries: [
        {
          server: registryServer
          identity: identity.id
        }
      ]
      secrets: [
        { name: 'bot-certificate', keyVaultUrl: '${vault}/bot-certificate', identity: identity.id }
        { name: 'oidc-client-secret', keyVaultUrl: '${vault}/oidc-client-secret', identity: identity.id }
        { name: 'database-url', keyVaultUrl: '${vault}/database-url', identity: identity.id }
        { name: 'frame-token-keys', keyVaultUrl: '${vault}/frame-token-keys', identity: identity.id }
        { name: 'signin-cookie-key', keyVaultUrl: '${vault}/signin-cookie-key', identity: identity.id }
        { name: 'mcp-token-key', keyVaultUrl: '${vault}/mcp-token-key', identity: identity.id }
      ]
    }
    template: {
      // The service drains for up to 20 seconds after SIGTERM.
      terminationGracePeriodSeconds: 30
      containers: [
        {
          name: 'teamsbot'
          image: image
          resources: {
            cpu: json('0.5')
            memory: '1Gi'
          }
          env: [
            { name: 'TICKETIQ_ADDR', value: ':3978' }
            { name: 'TICKETIQ_METRICS_ADDR', value: ':9090' }
            { name: 'TICKETIQ_DATA', value: '/data' }
            { name: 'TICKETIQ_PUBLIC_BASE_URL', value: publicBaseURL }
            { name: 'TICKETIQ_BOT_APP_ID', value: botAppId }
            { name: 'TICKETIQ_BOT_TENANT_ID', value: tenantId }
            { name: 'TICKETIQ_BOT_CERT_FILE', value: '/etc/teamsbot/bot.pem' }
            { name: 'TICKETIQ_OIDC_ISSUER', value: '${environment().authentication.loginEndpoint}${tenantId}/v2.0' }
            { name: 'TICKETIQ_OIDC_CLIENT_ID', value: signInClientId }
            { name: 'TICKETIQ_OIDC_CLIENT_SECRET', secretRef: 'oidc-client-secret' }
            { name: 'TICKETIQ_DATABASE_URL', secretRef: 'database-url' }
          ]
          probes: [
            {
              // A replica waits up to two minutes for its database before
              // it listens.
              type: 'Startup'
              httpGet: { path: '/healthz', port: 9090 }
              initialDelaySeconds: 10
              periodSeconds: 15
              timeoutSeconds: 2
              failureThreshold: 10
            }
            {
              type: 'Liveness'
              httpGet: { path: '/healthz', port: 9090 }
              periodSeconds: 10
              timeoutSeconds: 2
              failureThreshold: 3
            }
            {
              type: 'Readiness'
              httpGet: { path: '/readyz', port: 9090 }
              periodSeconds: 5
              timeoutSeconds: 2
              failureThreshold: 2
            }
          ]
          volumeMounts: [
            { volumeName: 'keys', mountPath: '/data' }
            { volumeName: 'credential', mountPath: '/etc/teamsbot' }
          ]
        }
      ]
      volumes: [
        {
          // The shared key files every replica reads, under the names the
          // service gives them.
          name: 'keys'
          storageType: 'Secret'
          secrets: [
            { secretRef: 'frame-token-keys', path: 'frame-token-keys.json' }
            { secretRef: 'signin-cookie-key', path: 'signin-cookie.key' }
            { secretRef: 'mcp-token-key', path: 'mcp-token.key' }
          ]
        }
        {
          name: 'credential'
          storageType: 'Secret'
          secrets: [
            { secretRef: 'bot-certificate', path: 'bot.pem' }
          ]
        }
      ]
      scale: {
        minReplicas: replicas
        maxReplicas: replicas
      }
    }
  }
}

// The Azure Bot: single tenant, on the existing app registration, with the
// Microsoft Teams channel.
resource bot 'Microsoft.BotService/botServices@2022-09-15' = {
  name: '${resourceBaseName}-bot'
  location: 'global'
  kind: 'azurebot'
  sku: {
    name: 'S1'
  }
  properties: {
    displayName: resourceBaseName
    endpoint: '${publicBaseURL}/api/messages'
    msaAppId: botAppId
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

// The Agents Toolkit writes each output into the environment's file under
// its own name.
output PUBLIC_BASE_URL string = publicBaseURL
output CONTAINER_APP_NAME string = app.name
output BOT_SERVICE_NAME string = bot.name
