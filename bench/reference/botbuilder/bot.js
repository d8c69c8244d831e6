// The reference bot of bench/side-by-side.sh: the official Bot Framework SDK
// for JavaScript (botbuilder, CloudAdapter) answering every message with one
// Adaptive Card, as the service answers /sales_report. It runs on Node's own
// http server (no web framework) so that only the SDK's cost is measured.
//
// Inbound tokens are checked by the SDK against the OpenID metadata at
// METADATA_URL (ToBotFromChannelOpenIdMetadataUrl), issuer
// https://api.botframework.com, endorsement for msteams. The bot token for
// the replies comes from TOKEN_URL (client credentials), fetched once and
// cached: the SDK's own credential factories go through MSAL, which will
// only talk to Microsoft's login hosts, so a ServiceClientCredentialsFactory
// of our own hands the connector client a TokenCredentials. The Bot
// Connector's certificate is trusted through NODE_EXTRA_CA_CERTS.
'use strict';

const http = require('node:http');
const fs = require('node:fs');
const { CloudAdapter, ConfigurationBotFrameworkAuthentication, CardFactory } = require('botbuilder');
const { ServiceClientCredentialsFactory, TokenCredentials } = require('botframework-connector');

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const appId = env('APP_ID');
const appPassword = env('APP_PASSWORD');
const tokenUrl = env('TOKEN_URL');
const card = JSON.parse(fs.readFileSync(env('CARD_FILE'), 'utf8'));
const host = '127.0.0.1';

class LocalTokenCredentialsFactory extends ServiceClientCredentialsFactory {
  constructor() {
    super();
    this.token = null;
  }
  async isValidAppId(id) {
    return id === appId;
  }
  async isAuthenticationDisabled() {
    return false;
  }
  async createCredentials() {
    if (!this.token) {
      this.token = fetch(tokenUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: appId,
          client_secret: appPassword,
          scope: 'https://api.botframework.com/.default',
        }),
      }).then(async (res) => {
        if (!res.ok) throw new Error(`token endpoint: ${res.status}`);
        return (await res.json()).access_token;
      });
      this.token.catch(() => {
        this.token = null;
      });
    }
    return new TokenCredentials(await this.token);
  }
}

const auth = new ConfigurationBotFrameworkAuthentication(
  {
    MicrosoftAppId: appId,
    MicrosoftAppType: 'MultiTenant',
    ToBotFromChannelOpenIdMetadataUrl: env('METADATA_URL'),
    ToBotFromChannelTokenIssuer: 'https://api.botframework.com',
    ToChannelFromBotOAuthScope: 'https://api.botframework.com',
    ToChannelFromBotLoginUrl: tokenUrl,
  },
  new LocalTokenCredentialsFactory(),
);
const adapter = new CloudAdapter(auth);
adapter.onTurnError = async (_context, err) => {
  console.error('turn error:', err);
};

const logic = async (context) => {
  if (context.activity.type === 'message') {
    await context.sendActivity({ attachments: [CardFactory.adaptiveCard(card)] });
  }
};

// response gives Node's ServerResponse the four methods CloudAdapter calls.
const response = (res) => ({
  status(code) {
    res.statusCode = code;
  },
  header(name, value) {
    res.setHeader(name, value);
  },
  send(body) {
    if (body === undefined) return;
    if (typeof body === 'object' && !Buffer.isBuffer(body)) {
      res.setHeader('content-type', 'application/json');
      body = JSON.stringify(body);
    }
    res.write(body);
  },
  end() {
    res.end();
  },
});

const server = http.createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/api/messages') {
    res.statusCode = req.url === '/healthz' ? 200 : 404;
    res.end();
    return;
  }
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size > 256 * 1024) {
      res.statusCode = 413;
      res.end();
      req.destroy();
      return;
    }
    chunks.push(c);
  });
  req.on('end', () => {
    try {
      req.body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      res.statusCode = 400;
      res.end();
      return;
    }
    adapter.process(req, response(res), logic).catch((err) => {
      console.error(err);
      if (!res.headersSent) res.statusCode = 500;
      res.end();
    });
  });
});
server.keepAliveTimeout = 120 * 1000;
server.listen(Number(env('PORT')), host);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
