// Drives `dsh serve --http` with the MCP TypeScript client (@modelcontextprotocol/client
// 2.x), pinned to the stateless revision 2026-07-28, and prints what it observed as one
// JSON object on stdout. Run by TestTypeScriptClientStatelessLane; the Go test asserts.
//
// Environment: DSH_URL (the /mcp endpoint), DSH_TOKEN and DSH_OTHER_TOKEN (two
// principals), DSH_SANDBOX_URL (a server under the sandbox profile, read-only mode).
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const env = process.env;
const out = {};

async function connect(url, token, { answer } = {}) {
  const options = { versionNegotiation: { mode: { pin: '2026-07-28' } } };
  if (answer) options.capabilities = { elicitation: { form: {} } };
  const client = new Client({ name: 'dsh-e2e-ts', version: '1.0.0' }, options);
  if (answer) {
    client.setRequestHandler('elicitation/create', async request => {
      (out.asked ??= []).push(request.params.message);
      return { action: answer() };
    });
  }
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

const text = result => result.content.filter(c => c.type === 'text').map(c => c.text).join('');
const call = async (client, name, args) => {
  const result = await client.callTool({ name, arguments: args });
  return { text: text(result), isError: result.isError ?? false, structured: result.structuredContent ?? null };
};

try {
  const a = await connect(env.DSH_URL, env.DSH_TOKEN);
  out.era = a.getProtocolEra();
  out.discover = a.getDiscoverResult()?.supportedVersions ?? null;
  out.server = a.getServerVersion();
  out.instructions = a.getInstructions() ?? '';
  out.tools = (await a.listTools()).tools.map(t => ({ name: t.name, hasOutputSchema: !!t.outputSchema }));
  out.echo = await call(a, 'bash', { command: 'echo hello from ts', description: 'Say hello' });
  out.sessionA = (await call(a, 'bash', { command: 'echo $DSH_SESSION_ID', description: 'Show the session id' })).text;

  // The completion notice: subscribe to dsh://notices, start a job.
  let resolveNotice;
  const noticed = new Promise(resolve => { resolveNotice = resolve; });
  a.setNotificationHandler('notifications/resources/updated', async n => {
    if (n.params.uri === 'dsh://notices') resolveNotice(n.params._meta?.['dev.dsh/notice'] ?? '');
  });
  const sub = await a.listen({ resourceSubscriptions: ['dsh://notices'] });
  out.honored = sub.honoredFilter;
  out.start = (await call(a, 'bash', { command: 'echo from the job; sleep 0.3', description: 'A short job', run_in_background: true })).text;
  out.notice = await Promise.race([noticed, new Promise(r => setTimeout(() => r('(timed out)'), 20000).unref())]);
  const read = await a.readResource({ uri: 'dsh://notices' });
  out.noticesResource = JSON.parse(read.contents[0].text);

  // A second connection of the same principal reads the job.
  const b = await connect(env.DSH_URL, env.DSH_TOKEN);
  out.sessionB = (await call(b, 'bash', { command: 'echo $DSH_SESSION_ID', description: 'Show the session id' })).text;
  out.jobOutput = (await call(b, 'job_output', { job_id: 'bash-1' })).text;

  // Another principal is fenced off.
  const o = await connect(env.DSH_URL, env.DSH_OTHER_TOKEN);
  out.fenced = await call(o, 'job_output', { job_id: 'bash-1' });

  // Escalation through input_required: decline, then accept.
  let action = 'decline';
  const s = await connect(env.DSH_SANDBOX_URL, env.DSH_TOKEN, { answer: () => action });
  const escalate = { command: 'touch marker', description: 'Create a marker file', sandbox_permissions: 'workspace-write', justification: 'The marker must be created in the workspace.' };
  out.declined = await call(s, 'bash', escalate);
  action = 'accept';
  out.accepted = await call(s, 'bash', escalate);

  await sub.close();
  for (const c of [a, b, o, s]) await c.close();
} catch (err) {
  out.error = String(err?.stack ?? err);
}
process.stdout.write(JSON.stringify(out) + '\n');
