// A minimal MCP App view built with the official SDK. The Go test bundles
// it with esbuild into one HTML file, serves it from a go-sdk MCP server and
// reads what happened from <body data-*>.
import { App } from "@modelcontextprotocol/ext-apps/app-with-deps";

const state = document.body.dataset;
const app = new App({ name: "viewpage-ext-apps-test", version: "1.0.0" });

app.ontoolinput = (params) => {
  state.toolInput = JSON.stringify(params.arguments ?? null);
};
app.ontoolresult = (result) => {
  state.toolResult = JSON.stringify(result);
};

(window as unknown as { callEcho: (text: string) => Promise<unknown> }).callEcho = async (text: string) => {
  const result = await app.callServerTool({ name: "ext_echo", arguments: { text } });
  state.callResult = JSON.stringify(result);
  return result;
};

async function main(): Promise<void> {
  try {
    await app.connect();
    state.host = JSON.stringify(app.getHostVersion() ?? null);
    state.theme = app.getHostContext()?.theme ?? "";
    state.connected = "yes";
  } catch (err) {
    state.connectError = String(err);
  }
}

main();
