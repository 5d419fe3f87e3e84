// A tiny MCP stdio server for the tests, written without the SDK so it can misbehave on
// purpose. Modes (first argument):
//   paged    - 5 tools over 3 pages of tools/list (cursors "page-2", "page-3");
//              tool `add_tool` adds `late_tool` and sends notifications/tools/list_changed;
//              tool `hang` never answers; tool `echo` answers its arguments as text;
//              tool `bad_result` answers a result that is not a CallToolResult.
//   silent   - reads requests and never answers.
//   garbage  - answers every request with a line that is not JSON.
//   no-tools - declares no tools capability (and refuses tools/list).
import readline from "node:readline";

const mode = process.argv[2] || "paged";
const tools = ["echo", "hang", "add_tool", "bad_result", "tool_4"].map((name) => ({
  name,
  description: `scripted ${name}`,
  inputSchema: { type: "object", properties: { text: { type: "string" } } },
}));
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const answer = (id, result) => send({ jsonrpc: "2.0", id, result });

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (mode === "silent") return;
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  if (message.id === undefined) return; // notifications
  if (mode === "garbage") {
    process.stdout.write("this is not JSON-RPC {{{\n");
    return;
  }
  const params = message.params || {};
  switch (message.method) {
    case "initialize":
      answer(message.id, {
        protocolVersion: params.protocolVersion,
        capabilities: mode === "no-tools" ? { prompts: {} } : { tools: { listChanged: true } },
        serverInfo: { name: "scripted", version: "1.0.0" },
      });
      break;
    case "tools/list": {
      if (mode === "no-tools") {
        send({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "no tools here" } });
        return;
      }
      const start = { undefined: 0, "page-2": 2, "page-3": 4 }[params.cursor];
      const end = start + 2;
      const page = tools.slice(start, end);
      const result = { tools: page };
      if (end < tools.length) result.nextCursor = end === 2 ? "page-2" : "page-3";
      answer(message.id, result);
      break;
    }
    case "tools/call":
      if (params.name === "hang") return;
      if (params.name === "bad_result") {
        answer(message.id, { content: 42, isError: "maybe" });
        return;
      }
      if (params.name === "add_tool") {
        if (!tools.some((tool) => tool.name === "late_tool")) {
          tools.push({ name: "late_tool", description: "added later", inputSchema: { type: "object" } });
        }
        send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
        answer(message.id, { content: [{ type: "text", text: "added late_tool" }] });
        return;
      }
      answer(message.id, { content: [{ type: "text", text: JSON.stringify(params.arguments || {}) }] });
      break;
    default:
      send({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "method not found" } });
  }
});
