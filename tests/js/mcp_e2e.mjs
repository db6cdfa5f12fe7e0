// `space mcp` driven by the official MCP TypeScript SDK, as an agent's
// client drives it: stdio transport, tools/list, a call of every tool
// against a real platform, a move of the sandbox between two calls, tool
// errors, a cancellation. Prints one line per check, "ok - ..." or
// "not ok - ...", and "# ..." diagnostics; tests/integration/70_mcp.sh
// numbers them. Environment: SPACE_API_URL, SPACE_API_KEY,
// SPACE_ROUTE_CACHE (the server's), SPACE (the space binary).
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

let failed = 0;
const ok = (cond, what) => {
	console.log(`${cond ? 'ok' : 'not ok'} - ${what}`);
	if (!cond) failed++;
	return cond;
};
const diag = (s) => console.log(String(s).split('\n').map((l) => `# ${l}`).join('\n'));
const eq = (got, want, what) => {
	const g = JSON.stringify(got), w = JSON.stringify(want);
	if (!ok(g === w, what)) diag(`got ${g}, want ${w}`);
};

const space = process.env.SPACE || 'space';
const env = {
	PATH: process.env.PATH,
	HOME: process.env.HOME || '/tmp',
	SPACE_API_URL: process.env.SPACE_API_URL,
	SPACE_API_KEY: process.env.SPACE_API_KEY,
	SPACE_ROUTE_CACHE: process.env.SPACE_ROUTE_CACHE,
	SPACE_EDGE_DOMAIN: process.env.SPACE_EDGE_DOMAIN,
};
// -v: the server logs each data-plane attempt and route repair on stderr
const transport = new StdioClientTransport({ command: space, args: ['-v', 'mcp'], env, stderr: 'pipe' });
let serverLog = '';
transport.stderr.on('data', (d) => { serverLog += d.toString(); });

const client = new Client({ name: 'space-tests', version: '1.0.0' });
await client.connect(transport);
eq(client.getServerVersion()?.name, 'space', 'initialize: the server says it is space');
ok(client.getServerCapabilities()?.tools !== undefined, 'initialize: it offers tools');

// ---- tools/list ----
const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
eq(names, ['get_sandbox', 'kill', 'list_dir', 'list_sandboxes', 'pause', 'port_url', 'read_file',
	'resume', 'run_command', 'sandbox_create', 'write_file'], 'tools/list names every tool');
ok(tools.every((t) => t.inputSchema?.type === 'object' && t.outputSchema?.type === 'object' &&
	typeof t.description === 'string' && t.description.length > 20),
	'every tool has a description, an object input schema and an object output schema');
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
const run = byName.run_command;
ok(run.inputSchema.properties.argv?.type === 'array' &&
	run.inputSchema.properties.command?.type === 'string' &&
	run.inputSchema.properties.timeout?.maximum === 3600 &&
	JSON.stringify(run.inputSchema.required) === '["sandbox"]',
	'run_command takes argv or command, a bounded timeout, and needs the sandbox');
ok(['exit_code', 'stdout', 'stderr', 'stdout_truncated'].every((k) => k in run.outputSchema.properties),
	'run_command returns exit_code, stdout, stderr and the truncation flags');
ok(['sandbox', 'path'].every((k) => byName.read_file.inputSchema.required.includes(k)) &&
	JSON.stringify(byName.read_file.inputSchema.properties.encoding.enum) === '["text","base64"]',
	'read_file needs sandbox and path, encoding text or base64');

ok(byName.read_file.annotations?.readOnlyHint === true && byName.kill.annotations?.destructiveHint === true &&
	byName.list_sandboxes.annotations?.readOnlyHint === true,
	'annotations: the reads are read-only, kill is destructive');

// callTool validates structuredContent against the tool's outputSchema
// (the SDK throws when it does not match)
const call = async (name, args, opts) => {
	try {
		return await client.callTool({ name, arguments: args }, undefined, opts);
	} catch (e) {
		return { thrown: e };
	}
};
const good = (r, what) => {
	if (!ok(r && !r.thrown && !r.isError && r.structuredContent, what))
		diag(r?.thrown ? String(r.thrown) : JSON.stringify(r?.content ?? r));
	return r?.structuredContent ?? {};
};
const bad = (r, re, what) => {
	const text = r?.content?.[0]?.text ?? '';
	if (!ok(r && !r.thrown && r.isError === true && re.test(text), what))
		diag(r?.thrown ? String(r.thrown) : JSON.stringify(r));
};

// ---- sandbox_create, with progress ----
const progress = [];
let r = await call('sandbox_create', { idle_timeout: 0 }, { onprogress: (p) => progress.push(p) });
const created = good(r, 'sandbox_create succeeds');
const sbx = created.id;
eq(created.state, 'running', 'the new sandbox runs');
ok(progress.length > 0 && progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress),
	'sandbox_create sent progress notifications, increasing');
ok(JSON.parse(r.content?.[0]?.text ?? '{}').id === sbx, 'the text content is the structured result as JSON');
const w1 = created.worker;

// ---- sandbox_create with an egress policy: the platform keeps it ----
r = await call('sandbox_create', { network: { internet: false, deny: ['203.0.113.0/24'] } });
const netSbx = good(r, 'sandbox_create with a network policy');
let pol = null;
try {
	pol = JSON.parse(execFileSync(space, ['network', netSbx.id, '--json'], { env, stdio: ['ignore', 'pipe', 'pipe'] }).toString());
} catch (e) {
	diag(`space network: ${e.stderr}`);
}
ok(pol !== null && pol.internet === false && JSON.stringify(pol.deny ?? []).includes('203.0.113.0/24'),
	`the policy given to sandbox_create is the sandbox's (${JSON.stringify(pol)})`);
r = await call('sandbox_create', { network: { internet: 'no' } });
ok(r.isError === true, 'a network policy of the wrong shape is a tool error');
await call('kill', { sandbox: netSbx.id });

// ---- run_command ----
r = await call('run_command', { sandbox: sbx, argv: ['sh', '-c', 'echo hi; echo err >&2; exit 3'] });
let o = good(r, 'run_command argv');
eq([o.exit_code, o.stdout, o.stderr, o.timed_out], [3, 'hi\n', 'err\n', false],
	'run_command: exit status, stdout and stderr');
o = good(await call('run_command', { sandbox: sbx, command: 'echo "$FOO" && pwd', cwd: '/tmp', env: { FOO: 'bar' } }),
	'run_command with a shell line, cwd and env');
eq(o.stdout, 'bar\n/tmp\n', 'the shell line ran in cwd with env');
o = good(await call('run_command', { sandbox: sbx, command: "head -c 5000 /dev/zero | tr '\\0' a",
	max_output_bytes: 100 }), 'run_command with much output');
eq([o.stdout.length, o.stdout_truncated, o.stderr_truncated], [100, true, false],
	'output beyond max_output_bytes is cut, and the flag says so');
o = good(await call('run_command', { sandbox: sbx, command: 'sleep 10', timeout: 1 }), 'run_command that times out');
eq(o.timed_out, true, 'timed_out says the command was killed at its timeout');
o = good(await call('run_command', { sandbox: sbx, command: 'cat', stdin: 'piped' }), 'run_command with stdin');
eq(o.stdout, 'piped', 'stdin reached the command');
bad(await call('run_command', { sandbox: sbx }), /exactly one of argv/, 'run_command without argv or command is a tool error');
bad(await call('run_command', { sandbox: sbx, argv: 'ls' }), /bad arguments: argv: want array/,
	'arguments against the schema are a tool error naming the member');

// ---- files ----
const dir = '/home/user/mcp';
o = good(await call('write_file', { sandbox: sbx, path: `${dir}/a.txt`, content: 'hello\n', make_parents: true }),
	'write_file text, making its directory');
eq(o.size, 6, 'write_file says the size written');
o = good(await call('read_file', { sandbox: sbx, path: `${dir}/a.txt` }), 'read_file text');
eq([o.content, o.encoding, o.truncated, o.size], ['hello\n', 'text', false, 6], 'read_file gives the text back');
const bin = Buffer.from([0, 1, 2, 255, 254, 10]).toString('base64');
good(await call('write_file', { sandbox: sbx, path: `${dir}/b.bin`, content: bin, encoding: 'base64', mode: '0600' }),
	'write_file base64');
bad(await call('write_file', { sandbox: sbx, path: `${dir}/c.bin`, content: '!!not base64', encoding: 'base64' }),
	/not standard base64/, 'write_file of bad base64: a tool error');
o = good(await call('read_file', { sandbox: sbx, path: `${dir}/b.bin`, encoding: 'base64' }), 'read_file base64');
eq([o.content, o.encoding], [bin, 'base64'], 'read_file gives the bytes back in base64');
o = good(await call('read_file', { sandbox: sbx, path: `${dir}/b.bin` }), 'read_file text of a binary file');
eq(o.encoding, 'base64', 'bytes that are not text come base64, and encoding says so');
o = good(await call('read_file', { sandbox: sbx, path: `${dir}/a.txt`, max_bytes: 3 }), 'read_file with max_bytes');
eq([o.content, o.truncated, o.size], ['hel', true, 6], 'read_file cuts at max_bytes and says so');
o = good(await call('list_dir', { sandbox: sbx, path: dir }), 'list_dir');
eq(o.entries.map((e) => `${e.name}:${e.type}:${e.size}`).sort(), ['a.txt:file:6', 'b.bin:file:6'],
	'list_dir names the files with type and size');
o = good(await call('run_command', { sandbox: sbx, command: `stat -c %a ${dir}/b.bin` }), 'stat of the written file');
eq(o.stdout, '600\n', 'write_file applied the mode');
bad(await call('read_file', { sandbox: sbx, path: `${dir}/nope` }), /not found/i, 'read_file of a missing file: not found');
bad(await call('read_file', { sandbox: sbx, path: dir }), /is a directory/, 'read_file of a directory says so');

// ---- list, get ----
o = good(await call('list_sandboxes', {}), 'list_sandboxes');
ok(o.sandboxes.some((s) => s.id === sbx && s.state === 'running'), 'list_sandboxes has the sandbox, running');
o = good(await call('get_sandbox', { sandbox: sbx }), 'get_sandbox');
ok(o.id === sbx && o.generation === 1 && typeof o.resources === 'object', 'get_sandbox: generation 1, resources');

// ---- port_url: a server in the sandbox, declared and reached through space-edge ----
// GET through the edge with Host PORT-SBX.DOMAIN: [status, body]
function viaEdge(url, headers) {
	const edge = new URL(process.env.SPACE_EDGE_URL);
	const u = new URL(url);
	return new Promise((resolve) => {
		const req = http.request({ host: edge.hostname, port: edge.port, path: u.pathname,
			headers: { Host: u.host, ...headers } }, (res) => {
			let b = '';
			res.on('data', (d) => { b += d; });
			res.on('end', () => resolve([res.statusCode, b]));
		});
		req.on('error', (e) => resolve([0, String(e)]));
		req.setTimeout(10000, () => req.destroy(new Error('timeout')));
		req.end();
	});
}
try {
	execFileSync(space, ['exec', '--timeout', '10', sbx, '--', 'sh', '-c',
		`mkdir -p /home/user/www && echo port-url-works >/home/user/www/index.html && cd /home/user/www &&
		 setsid /usr/bin/python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 </dev/null & sleep 1`],
	{ env, stdio: ['ignore', 'pipe', 'pipe'] });
} catch (e) {
	diag(`space exec (the web server): ${e.stderr}`);
}
o = good(await call('port_url', { sandbox: sbx, port: 8000 }), 'port_url: port 8000, private');
eq(o.url, `http://8000-${sbx}.${process.env.SPACE_EDGE_DOMAIN}/`, 'port_url: the URL names the port, the sandbox and the edge domain');
let [st, body] = await viaEdge(o.url, {});
eq(st, 401, 'the private URL without a credential: 401');
[st, body] = await viaEdge(o.url, { Authorization: `Bearer ${process.env.SPACE_API_KEY}` });
ok(st === 200 && /port-url-works/.test(body), `the URL with the owner's key reaches the server in the sandbox (${st})`);
o = good(await call('port_url', { sandbox: sbx, port: 8000, public: true }), 'port_url: the same port made public');
[st, body] = await viaEdge(o.url, {});
ok(st === 200 && /port-url-works/.test(body), `the public URL needs no credential (${st})`);
bad(await call('port_url', { sandbox: sbx, port: 0 }), /port|minimum|invalid/i, 'port_url with port 0: a tool error');

// ---- a move between two calls: followed, invisible to the agent ----
const w2 = w1 === 'w1' ? 'w2' : 'w1';
let moved = false;
try {
	execFileSync(space, ['move', sbx, '--to', w2], { env, stdio: ['ignore', 'pipe', 'pipe'] });
	moved = true;
} catch (e) {
	diag(`space move: ${e.stderr}`);
}
ok(moved, `the sandbox is moved to ${w2} between two tool calls (space move)`);
const before = serverLog.length;
o = good(await call('read_file', { sandbox: sbx, path: `${dir}/a.txt` }), 'the next call succeeds');
eq(o.content, 'hello\n', 'and reads the file from the moved sandbox');
// the log line (stderr) may arrive after the answer (stdout): another pipe
const repaired = (s) => /repaired to gen 2 on /.test(s) && /1 rebuilt attempt/.test(s);
for (let i = 0; i < 100 && !repaired(serverLog.slice(before)); i++)
	await new Promise((res) => setTimeout(res, 100));
const repair = serverLog.slice(before);
if (!ok(/repaired to gen 2 on /.test(repair) && /1 rebuilt attempt/.test(repair),
	'the server followed the move with the route cache\'s one rebuilt attempt'))
	diag(repair);
o = good(await call('get_sandbox', { sandbox: sbx }), 'get_sandbox after the move');
eq([o.worker, o.generation], [w2, 2], 'the sandbox runs generation 2 on the other worker');

// ---- cancellation ----
const ac = new AbortController();
const slow = call('run_command', { sandbox: sbx, command: 'sleep 30', timeout: 60 },
	{ signal: ac.signal, onprogress: () => ac.abort('test cancels') });
r = await slow;
ok(r.thrown !== undefined, 'a cancelled call ends on the client side');
for (let i = 0; i < 100 && !/run_command cancelled/.test(serverLog); i++)
	await new Promise((res) => setTimeout(res, 100));
ok(/run_command cancelled/.test(serverLog), 'the server stopped the call (notifications/cancelled)');
r = await client.ping().then(() => true, () => false);
ok(r, 'the server answers ping after the cancellation');

// ---- lifecycle and errors an agent can act on ----
o = good(await call('pause', { sandbox: sbx }), 'pause');
eq(o.state, 'paused', 'the sandbox is paused');
bad(await call('run_command', { sandbox: sbx, argv: ['true'] }), /is paused: call resume first/,
	'run_command on a paused sandbox: a tool error that says to resume');
o = good(await call('resume', { sandbox: sbx }), 'resume');
eq([o.state, o.generation], ['running', 3], 'the sandbox runs again, generation 3');
o = good(await call('read_file', { sandbox: sbx, path: `${dir}/a.txt` }), 'read_file after the resume');
eq(o.content, 'hello\n', 'the files came back with the resume');
bad(await call('get_sandbox', { sandbox: 'nosuch' }), /not found/, 'an unknown sandbox: not found');
bad(await call('run_command', { sandbox: 'nosuch', argv: ['true'] }), /not found/,
	'run_command on an unknown sandbox: not found');
o = good(await call('kill', { sandbox: sbx }), 'kill');
ok(['killed', 'stopping'].includes(o.state), 'the sandbox is killed');
bad(await call('run_command', { sandbox: sbx, argv: ['true'] }), /killed|stopping|not found/,
	'run_command on a killed sandbox is a tool error');

// an unknown tool is a protocol error (-32602), and the server goes on
r = await call('no_such_tool', {});
ok(r.thrown && /-32602|Unknown tool|unknown tool/.test(String(r.thrown)), 'an unknown tool: error -32602');
r = await client.ping().then(() => true, () => false);
ok(r, 'the server is still up at the end');

await client.close();

// ---- the quota of another API key (at most one sandbox): 429 said plainly ----
if (process.env.SPACE_QUOTA_KEY) {
	const qt = new StdioClientTransport({ command: space, args: ['mcp'],
		env: { ...env, SPACE_API_KEY: process.env.SPACE_QUOTA_KEY }, stderr: 'ignore' });
	const qc = new Client({ name: 'space-tests-quota', version: '1.0.0' });
	await qc.connect(qt);
	await qc.listTools();
	const one = await qc.callTool({ name: 'sandbox_create', arguments: {} }).catch((e) => ({ thrown: e }));
	const first = good(one, 'a key allowed one sandbox creates it');
	const two = await qc.callTool({ name: 'sandbox_create', arguments: {} }).catch((e) => ({ thrown: e }));
	bad(two, /quota exceeded: .*(retry after \d+ s)?/, 'its second sandbox_create: a tool error that says quota exceeded');
	diag(two?.content?.[0]?.text ?? '');
	if (first.id)
		good(await qc.callTool({ name: 'kill', arguments: { sandbox: first.id } }).catch((e) => ({ thrown: e })),
			'kill its sandbox');
	await qc.close();
}
diag(`server log:\n${serverLog.split('\n').slice(-5).join('\n')}`);
process.exit(failed ? 1 : 0);
