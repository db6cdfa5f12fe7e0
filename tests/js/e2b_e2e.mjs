// The official E2B SDK (tests/js, pinned in package-lock.json) against
// space-edge's E2B-compatible API, configured only by the environment that
// `space up` writes (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, E2B_DOMAIN).
// Prints one "ok - ..." / "not ok - ..." line per check (75_e2b.sh numbers
// them). OTHER_KEY: a second API key of another principal.
import { Sandbox, CommandExitError, SandboxNotFoundError, NotFoundError,
	AuthenticationError, SandboxError, FileNotFoundError, FilesystemEventType } from 'e2b'

const say = (good, what, why) => {
	console.log(`${good ? 'ok' : 'not ok'} - ${what}`)
	if (!good && why !== undefined) console.log(`# ${String(why).split('\n').join('\n# ')}`)
}
const check = async (what, fn) => {
	try { say(!!(await fn()), what) } catch (e) { say(false, what, e && e.stack ? e.stack : e) }
}
const throwsClass = async (what, cls, fn) => {
	try { await fn(); say(false, what, 'no error') } catch (e) {
		say(e instanceof cls, what, `${e && e.name}: ${e && e.message}`)
	}
}

const sbx = await Sandbox.create({ metadata: { suite: 'e2b', run: process.pid.toString() } })
say(typeof sbx.sandboxId === 'string' && sbx.sandboxId.length > 0, 'Sandbox.create gives a sandbox')
say(typeof sbx.envdAccessToken === 'string' && sbx.envdAccessToken.startsWith('at_') &&
	sbx.envdAccessToken !== process.env.E2B_API_KEY,
	'its envdAccessToken is a per-sandbox access token (every sandbox call below sends it)')

await check('commands.run: stdout and exit code 0', async () => {
	const r = await sbx.commands.run('echo hello; echo err >&2')
	return r.exitCode === 0 && r.stdout === 'hello\n' && r.stderr === 'err\n'
})
await throwsClass('a non-zero exit raises CommandExitError', CommandExitError, () =>
	sbx.commands.run('echo out; exit 3'))
await check('CommandExitError carries the exit code and output', async () => {
	try { await sbx.commands.run('echo bad >&2; exit 7'); return false } catch (e) {
		return e instanceof CommandExitError && e.exitCode === 7 && e.stderr === 'bad\n'
	}
})
await check('env and cwd of a command', async () => {
	const r = await sbx.commands.run('echo "$GREETING" && pwd', { envs: { GREETING: 'hi there' }, cwd: '/tmp' })
	return r.stdout === 'hi there\n/tmp\n'
})
await check('envs of the create reach every command, a command\'s own over them; kept across a pause', async () => {
	const o = await Sandbox.create({ envs: { FROM_CREATE: 'create value', SHARED: 'create' }, metadata: { run: process.pid.toString() } })
	const a = await o.commands.run('echo "$FROM_CREATE|$SHARED"')
	const b = await o.commands.run('echo "$FROM_CREATE|$SHARED"', { envs: { SHARED: 'command' } })
	const h = await o.commands.run('echo "$FROM_CREATE"', { background: true })
	const c = await h.wait()
	await o.pause()
	const again = await Sandbox.connect(o.sandboxId)
	const d = await again.commands.run('echo "$FROM_CREATE"')
	const plain = await sbx.commands.run('echo "[$FROM_CREATE]"')
	await again.kill()
	const good = a.stdout === 'create value|create\n' && b.stdout === 'create value|command\n' &&
		c.stdout === 'create value\n' && d.stdout === 'create value\n' && plain.stdout === '[]\n'
	if (!good) console.log(`# ${JSON.stringify([a.stdout, b.stdout, c.stdout, d.stdout, plain.stdout])}`)
	return good
})
await check('output arrives while the command runs', async () => {
	// the command prints "one", then waits for a file that is written only
	// once "one" has reached this client: without streaming it never ends
	let released = null
	const r = await sbx.commands.run(
		'echo one; i=0; while [ ! -e /tmp/go ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done; ' +
		'[ -e /tmp/go ] && echo two', {
			onStdout: (d) => {
				if (released === null && d.includes('one'))
					released = sbx.files.write('/tmp/go', 'go')
			}
		})
	if (released) await released
	return r.stdout === 'one\ntwo\n'
})
await check('background command: list, stdin, kill', async () => {
	const h = await sbx.commands.run('cat > /tmp/bg.out; sleep 600', { background: true, stdin: true })
	const listed = (await sbx.commands.list()).some((p) => p.pid === h.pid)
	await sbx.commands.sendStdin(h.pid, 'typed\n')
	await sbx.commands.closeStdin(h.pid)
	let seen = ''
	for (let i = 0; i < 100 && seen !== 'typed\n'; i++) {
		seen = await sbx.files.read('/tmp/bg.out').catch(() => '')
		if (seen !== 'typed\n') await new Promise((r) => setTimeout(r, 100))
	}
	const killed = await sbx.commands.kill(h.pid)
	// the signal is sent; the process leaves the list once it was reaped
	let gone = false
	for (let i = 0; i < 100 && !gone; i++) {
		gone = !(await sbx.commands.list()).some((p) => p.pid === h.pid)
		if (!gone) await new Promise((r) => setTimeout(r, 100))
	}
	if (!(listed && seen === 'typed\n' && killed && gone))
		console.log(`# listed=${listed} seen=${JSON.stringify(seen)} killed=${killed} gone=${gone}`)
	return listed && seen === 'typed\n' && killed && gone
})
await check('commands.connect to a running background command', async () => {
	const h = await sbx.commands.run('sleep 2; for i in 1 2 3; do echo line$i; sleep 0.2; done',
		{ background: true })
	await h.disconnect()
	let seen = ''
	const again = await sbx.commands.connect(h.pid, { onStdout: (d) => { seen += d } })
	const r = await again.wait()
	if (!(r.exitCode === 0 && seen.includes('line3'))) console.log(`# connect: ${JSON.stringify(seen)} ${r.exitCode}`)
	return r.exitCode === 0 && seen.includes('line3')
})
await check('a killed command ends with a non-zero exit (CommandExitError)', async () => {
	const h = await sbx.commands.run('sleep 600', { background: true })
	await sbx.commands.kill(h.pid)
	try { await h.wait(); return false } catch (e) { return e instanceof CommandExitError }
})

// files
await check('files.write and files.read (text)', async () => {
	await sbx.files.write('/home/user/a.txt', 'some text\n')
	return (await sbx.files.read('/home/user/a.txt')) === 'some text\n'
})
await check('files.write of a small file answers one entry, its path (written once)', async () => {
	const info = await sbx.files.write('/home/user/s.txt', 'go')
	return !Array.isArray(info) && info.path === '/home/user/s.txt' &&
		(await sbx.files.read('/home/user/s.txt')) === 'go'
})
await check('files.write of 40 small files at once', async () => {
	const entries = []
	for (let i = 0; i < 40; i++) entries.push({ path: `/home/user/many/f${i}.txt`, data: `n${i}` })
	const infos = await sbx.files.write(entries)
	const back = await sbx.files.read('/home/user/many/f39.txt')
	if (infos.length !== 40) console.log(`# ${infos.length} entries answered`)
	return infos.length === 40 && infos[39].path === '/home/user/many/f39.txt' && back === 'n39'
})
await check('files.write with gzip: the file is written as given', async () => {
	const text = 'compressed on the way\n'.repeat(5000)
	await sbx.files.write('/home/user/gz.txt', text, { gzip: true })
	return (await sbx.files.read('/home/user/gz.txt')) === text
})
await check('files binary round trip of 5 MiB', async () => {
	const big = new Uint8Array(5 * 1024 * 1024)
	for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 11)) & 0xff
	await sbx.files.write('/home/user/big.bin', big.buffer)
	const back = await sbx.files.read('/home/user/big.bin', { format: 'bytes' })
	if (back.length !== big.length) return false
	for (let i = 0; i < big.length; i++) if (back[i] !== big[i]) return false
	return true
})
await check('files.write makes the parent directories', async () => {
	await sbx.files.write('/home/user/deep/er/f.txt', 'x')
	return (await sbx.files.read('/home/user/deep/er/f.txt')) === 'x'
})
await check('files.makeDir, then false for an existing one', async () =>
	(await sbx.files.makeDir('/home/user/newdir')) === true &&
	(await sbx.files.makeDir('/home/user/newdir')) === false)
await check('files.list', async () => {
	const l = await sbx.files.list('/home/user')
	const names = l.map((e) => e.name)
	const a = l.find((e) => e.name === 'a.txt')
	return names.includes('a.txt') && names.includes('newdir') && a.type === 'file' &&
		a.size === 10 && a.path === '/home/user/a.txt' &&
		l.find((e) => e.name === 'newdir').type === 'dir'
})
await check('files.exists', async () =>
	(await sbx.files.exists('/home/user/a.txt')) && !(await sbx.files.exists('/home/user/nope')))
await check('files.rename', async () => {
	const e = await sbx.files.rename('/home/user/a.txt', '/home/user/b.txt')
	return e.path === '/home/user/b.txt' && !(await sbx.files.exists('/home/user/a.txt')) &&
		(await sbx.files.read('/home/user/b.txt')) === 'some text\n'
})
await check('files.remove', async () => {
	await sbx.files.remove('/home/user/b.txt')
	return !(await sbx.files.exists('/home/user/b.txt'))
})
await throwsClass('reading a missing file raises FileNotFoundError', FileNotFoundError, () =>
	sbx.files.read('/home/user/missing.txt'))
await check('files.getInfo', async () => {
	const i = await sbx.files.getInfo('/home/user/newdir')
	return i.type === 'dir' && i.name === 'newdir'
})

// control API
await check('Sandbox.getInfo', async () => {
	const i = await sbx.getInfo()
	return i.sandboxId === sbx.sandboxId && i.state === 'running' && i.metadata.suite === 'e2b'
})
await check('Sandbox.list with a metadata filter', async () => {
	const p = Sandbox.list({ query: { metadata: { suite: 'e2b', run: process.pid.toString() } } })
	const items = await p.nextItems()
	return items.length === 1 && items[0].sandboxId === sbx.sandboxId
})
await check('isRunning while it runs', async () => (await sbx.isRunning()) === true)
await check('create, getInfo and list name the same templateID', async () => {
	const i = await sbx.getInfo()
	const items = await Sandbox.list({ query: { metadata: { run: process.pid.toString() } } }).nextItems()
	return typeof i.templateId === 'string' && i.templateId.length > 0 &&
		items.length === 1 && items[0].templateId === i.templateId
})
await check('Sandbox.list: a metadata value with spaces, @, / and : is matched', async () => {
	const md = { owner: 'alice@example.com', tag: 'a b/c:d+e%f', run: process.pid.toString() }
	const o = await Sandbox.create({ metadata: md })
	const found = await Sandbox.list({ query: { metadata: { owner: md.owner, tag: md.tag } } }).nextItems()
	const none = await Sandbox.list({ query: { metadata: { owner: 'alice@example.org' } } }).nextItems()
	await o.kill()
	return found.length === 1 && found[0].sandboxId === o.sandboxId && none.length === 0
})
await check('Sandbox.list filters by template and startedAfter, and orders', async () => {
	const run = process.pid.toString()
	const tpl = (await sbx.getInfo()).templateId
	const o = await Sandbox.create({ metadata: { suite: 'e2b', run } })
	const md = { run }
	const byTpl = await Sandbox.list({ query: { metadata: md, template: tpl } }).nextItems()
	const noTpl = await Sandbox.list({ query: { metadata: md, template: 'no-such-template' } }).nextItems()
	const future = await Sandbox.list({ query: { metadata: md, startedAfter: new Date(Date.now() + 3600e3) } }).nextItems()
	const past = await Sandbox.list({ query: { metadata: md, startedAfter: new Date(Date.now() - 3600e3) } }).nextItems()
	const asc = (await Sandbox.list({ query: { metadata: md }, order: 'asc' }).nextItems()).map((x) => x.sandboxId)
	const desc = (await Sandbox.list({ query: { metadata: md }, order: 'desc' }).nextItems()).map((x) => x.sandboxId)
	await o.kill()
	const good = byTpl.length === 2 && noTpl.length === 0 && future.length === 0 && past.length === 2 &&
		asc.length === 2 && JSON.stringify(asc) === JSON.stringify([...desc].reverse())
	if (!good) console.log(`# tpl=${byTpl.length} none=${noTpl.length} future=${future.length} past=${past.length} asc=${asc} desc=${desc}`)
	return good
})
await check('Sandbox.list pages with a limit', async () => {
	const other = await Sandbox.create({ metadata: { suite: 'e2b', run: process.pid.toString() } })
	const p = Sandbox.list({ limit: 1, query: { metadata: { run: process.pid.toString() } } })
	const a = await p.nextItems()
	const more = p.hasNext
	const b = more ? await p.nextItems() : []
	await other.kill()
	return a.length === 1 && more && b.length === 1 && a[0].sandboxId !== b[0].sandboxId
})
await check('setTimeout', async () => { await sbx.setTimeout(120000); return true })
await check('connect: a shorter timeoutMs keeps the timeout, a longer one extends it; setTimeout reduces it', async () => {
	const api = process.env.SPACE_API_URL
	const h = { Authorization: `Bearer ${process.env.SPACE_API_KEY}` }
	const idle = async () => (await (await fetch(`${api}/v1/sandboxes/${sbx.sandboxId}`, { headers: h })).json()).timeouts.idle
	await Sandbox.connect(sbx.sandboxId, { timeoutMs: 30000 })
	const a = await idle()
	await Sandbox.connect(sbx.sandboxId, { timeoutMs: 600000 })
	const b = await idle()
	await sbx.setTimeout(120000)
	const c = await idle()
	if (!(a === 120 && b === 600 && c === 120)) console.log(`# idle timeouts ${a} ${b} ${c}`)
	return a === 120 && b === 600 && c === 120
})

if (process.env.OTHER_KEY) {
	await throwsClass('another key cannot see the sandbox (getInfo)', SandboxNotFoundError, () =>
		Sandbox.getInfo(sbx.sandboxId, { apiKey: process.env.OTHER_KEY }))
	await check('another key cannot kill it', async () =>
		(await Sandbox.kill(sbx.sandboxId, { apiKey: process.env.OTHER_KEY })) === false)
	await check('another key lists none of it', async () => {
		const items = await Sandbox.list({ apiKey: process.env.OTHER_KEY }).nextItems()
		return !items.some((s) => s.sandboxId === sbx.sandboxId)
	})
	await check('another key cannot run in it', async () => {
		const s2 = await Sandbox.connect(sbx.sandboxId, { apiKey: process.env.OTHER_KEY }).catch((e) => e)
		return s2 instanceof SandboxNotFoundError
	})
}
await throwsClass('a bad API key raises AuthenticationError', AuthenticationError, () =>
	Sandbox.list({ apiKey: 'sk_not_a_key' }).nextItems())
await check('an unknown template is refused with a 4xx SandboxError', async () => {
	try { await Sandbox.create('no-such-template'); return false } catch (e) {
		return e instanceof SandboxError && e.statusCode >= 400 && e.statusCode < 500
	}
})
await check('pause with keepMemory is refused (400), the sandbox runs on', async () => {
	try { await Sandbox.pause(sbx.sandboxId, { keepMemory: true }); return false } catch (e) {
		return e instanceof SandboxError && e.statusCode === 400 &&
			(await sbx.getInfo()).state === 'running'
	}
})
await check('Sandbox.connect to a running sandbox', async () => {
	const s2 = await Sandbox.connect(sbx.sandboxId)
	return (await s2.commands.run('echo again')).stdout === 'again\n'
})
await check('getHost names the edge host of a port', async () =>
	sbx.getHost(8080) === `8080-${sbx.sandboxId}.${process.env.E2B_DOMAIN}`)
// a web server in the sandbox at getHost: space admits a declared port
// only (the seed's second check), declared public here through space's API
await check('a web server in the sandbox is reached at getHost(port) through space-edge', async () => {
	const http = await import('node:http')
	await sbx.files.write('/tmp/www/index.html', 'e2b-gethost-works\n')
	await sbx.commands.run('python3 -m http.server 8090 --bind 127.0.0.1 --directory /tmp/www',
		{ background: true })
	const d = await fetch(`${process.env.SPACE_API_URL}/v1/sandboxes/${sbx.sandboxId}/ports`, {
		method: 'POST', headers: { Authorization: `Bearer ${process.env.SPACE_API_KEY}` },
		body: JSON.stringify({ port: 8090, public: true }) })
	if (d.status !== 200) throw new Error(`declare: ${d.status} ${await d.text()}`)
	const edge = new URL(process.env.SPACE_EDGE_URL)
	const get = () => new Promise((resolve) => {
		const req = http.request({ host: edge.hostname, port: edge.port, path: '/',
			headers: { Host: sbx.getHost(8090) } }, (res) => {
			let b = ''
			res.on('data', (c) => { b += c })
			res.on('end', () => resolve([res.statusCode, b]))
		})
		req.on('error', (e) => resolve([0, String(e)]))
		req.setTimeout(10000, () => req.destroy(new Error('timeout')))
		req.end()
	})
	let st = 0, body = ''
	for (let i = 0; i < 50; i++) {
		[st, body] = await get()
		if (st === 200) break
		await new Promise((r) => setTimeout(r, 100))       // the server is starting
	}
	if (!(st === 200 && body.includes('e2b-gethost-works'))) throw new Error(`${st} ${body.slice(0, 200)}`)
	return true
})

// PTY and watches
const enc = (t) => new TextEncoder().encode(t)
const until = async (f) => { for (let i = 0; i < 100 && !f(); i++) await new Promise((r) => setTimeout(r, 100)); return f() }
await check('pty: create, input, resize, kill', async () => {
	let out = ''
	const dec = new TextDecoder()
	const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d, { stream: true }) } })
	await sbx.pty.sendInput(h.pid, enc('echo pty-$((6*7))\n'))
	const echoed = await until(() => out.includes('pty-42'))
	await sbx.pty.resize(h.pid, { cols: 100, rows: 30 })
	await sbx.pty.sendInput(h.pid, enc('stty size\n'))
	const sized = await until(() => out.includes('30 100'))
	const killed = await h.kill()
	if (!(echoed && sized && killed)) console.log(`# pty echoed=${echoed} sized=${sized} killed=${killed} out=${JSON.stringify(out.slice(-300))}`)
	return echoed && sized && killed
})
await check('files.watchDir sees files.write as envd reports it: a write of the file, no temporary file', async () => {
	await sbx.files.makeDir('/home/user/w')
	const events = []
	const w = await sbx.files.watchDir('/home/user/w', (e) => events.push(e))
	await sbx.files.write('/home/user/w/f.txt', 'x')
	const seen = await until(() => events.some((e) => e.name === 'f.txt' && e.type === FilesystemEventType.WRITE))
	await sbx.commands.run('echo more >> /home/user/w/g.txt')
	const shell = await until(() => events.some((e) => e.name === 'g.txt' && e.type === FilesystemEventType.WRITE))
	await w.stop()
	const clean = events.every((e) => e.name === 'f.txt' || e.name === 'g.txt')
	if (!(seen && shell && clean)) console.log(`# events ${JSON.stringify(events)}`)
	return seen && shell && clean
})

// a move through space's own API while the SDK holds the sandbox
await check('a move: the next SDK call is answered by the new execution, files kept', async () => {
	const api = process.env.SPACE_API_URL
	const h = { Authorization: `Bearer ${process.env.SPACE_API_KEY}`, 'Content-Type': 'application/json' }
	const get = async () => (await fetch(`${api}/v1/sandboxes/${sbx.sandboxId}`, { headers: h })).json()
	await sbx.files.write('/home/user/moved.txt', 'before move')
	const s0 = await get()
	const to = s0.execution.worker === 'w1' ? 'w2' : 'w1'
	const r = await fetch(`${api}/v1/sandboxes/${sbx.sandboxId}/move`, { method: 'POST', headers: h, body: JSON.stringify({ to }) })
	if (r.status !== 202) { console.log(`# move: ${r.status} ${await r.text()}`); return false }
	let s1
	for (let i = 0; i < 240; i++) {
		s1 = await get()
		if (s1.state === 'running' && s1.execution && s1.execution.state === 'serving') break
		await new Promise((res) => setTimeout(res, 250))
	}
	const out = await sbx.commands.run('cat /home/user/moved.txt')
	if (out.stdout !== 'before move') console.log(`# after the move: ${JSON.stringify(out.stdout)}`)
	return out.stdout === 'before move' && s1.execution.worker === to &&
		s1.execution.generation > s0.execution.generation
})

// pause, then connect with files kept
await check('pause, list by state, connect: files kept; a second pause returns false', async () => {
	await sbx.files.write('/home/user/kept.txt', 'kept')
	const paused = await sbx.pause()
	const info = await Sandbox.getInfo(sbx.sandboxId)
	const md = { run: process.pid.toString() }
	const pausedList = await Sandbox.list({ query: { state: ['paused'], metadata: md } }).nextItems()
	const runningList = await Sandbox.list({ query: { state: ['running'], metadata: md } }).nextItems()
	const listed = pausedList.some((x) => x.sandboxId === sbx.sandboxId) &&
		!runningList.some((x) => x.sandboxId === sbx.sandboxId)
	if (!listed) console.log('# the state filter of list did not tell paused from running')
	const again = await Sandbox.connect(sbx.sandboxId)
	const txt = await again.files.read('/home/user/kept.txt')
	const r = await again.commands.run('cat /home/user/kept.txt')
	return paused === true && info.state === 'paused' && listed && txt === 'kept' &&
		r.stdout === 'kept' && (await sbx.pause().catch(() => null)) === true &&
		(await Sandbox.pause(sbx.sandboxId)) === false &&
		(await Sandbox.connect(sbx.sandboxId)).sandboxId === sbx.sandboxId
})

await check('kill, then the sandbox is gone', async () => {
	const killed = await sbx.kill()
	const again = await Sandbox.kill(sbx.sandboxId)
	let nf = false
	try { await Sandbox.getInfo(sbx.sandboxId) } catch (e) { nf = e instanceof SandboxNotFoundError }
	const running = await sbx.isRunning()
	if (running !== false) console.log(`# isRunning after kill: ${running}`)
	return killed === true && again === false && nf && running === false
})
