// Drives a `dsh serve --http` that has a rules row with the MCP TypeScript client
// (@modelcontextprotocol/client 2.x) pinned to the stateless revision 2026-07-28: a call
// that a rule asks about and that escalates the sandbox, answered through input_required
// (the rule's question ticked "for the session"), twice. Prints what it observed as one
// JSON object on stdout; TestTypeScriptClientPolicy asserts.
//
// Environment: DSH_URL (the /mcp endpoint), DSH_TOKEN.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const env = process.env;
const out = { asked: [] };

try {
  const client = new Client({ name: 'dsh-e2e-ts-policy', version: '1.0.0' }, {
    versionNegotiation: { mode: { pin: '2026-07-28' } },
    capabilities: { elicitation: { form: {} } },
  });
  client.setRequestHandler('elicitation/create', async request => {
    const schema = request.params.requestedSchema ?? {};
    const offersSession = 'forSession' in (schema.properties ?? {});
    out.asked.push({ message: request.params.message, offersSession });
    return offersSession ? { action: 'accept', content: { forSession: true } } : { action: 'accept' };
  });
  const transport = new StreamableHTTPClientTransport(new URL(env.DSH_URL), {
    requestInit: { headers: { Authorization: `Bearer ${env.DSH_TOKEN}` } },
  });
  await client.connect(transport);
  const args = { command: 'touch marker && echo ran >> marker.log', description: 'Create a marker',
    sandbox_permissions: 'workspace-write', justification: 'The marker belongs in the workspace.' };
  out.results = [];
  for (let i = 0; i < 2; i++) {
    const result = await client.callTool({ name: 'bash', arguments: args });
    out.results.push({ text: result.content.filter(c => c.type === 'text').map(c => c.text).join(''), isError: result.isError ?? false });
  }
  await client.close();
} catch (err) {
  out.error = String(err?.stack ?? err);
}
process.stdout.write(JSON.stringify(out) + '\n');
