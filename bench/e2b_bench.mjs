// The E2B-compatible API against space's native API, in one run, from the
// same Node process (bench/e2b.sh starts the platform):
//   create to first command   Sandbox.create() + commands.run('true')
//                             vs POST /v1/sandboxes, wait until it serves,
//                             POST routes, POST exec (bash -l -c true)
//   command round trip        commands.run('true') on a created sandbox
//                             vs POST exec of bash -l -c true with a held
//                             capability (what the SDK's command runs)
// Prints one line per figure: name, median ms of both, the ratio. Nothing
// asserts a timing.
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const top = path.dirname(path.dirname(fileURLToPath(import.meta.url)))
const { Sandbox } = await import(path.join(top, 'tests/js/node_modules/e2b/dist/index.mjs'))
const N_CREATE = Number(process.env.E2B_BENCH_CREATES || 5)
const N_RT = Number(process.env.E2B_BENCH_ROUNDS || 40)
const api = process.env.SPACE_API_URL
const auth = { Authorization: `Bearer ${process.env.SPACE_API_KEY}`, 'Content-Type': 'application/json' }

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
const ms = () => Number(process.hrtime.bigint()) / 1e6
const post = async (url, body) => {
	const r = await fetch(url, { method: 'POST', headers: auth, body: JSON.stringify(body) })
	if (!r.ok) throw new Error(`${url}: ${r.status} ${await r.text()}`)
	return r.json()
}
const ARGV = ['/bin/bash', '-l', '-c', 'true']

async function nativeCreate () {
	const s = await post(`${api}/v1/sandboxes`, {})
	for (;;) {
		const g = await (await fetch(`${api}/v1/sandboxes/${s.id}`, { headers: auth })).json()
		if (g.state === 'running' && g.execution && g.execution.state === 'serving') break
		await new Promise((r) => setTimeout(r, 5))
	}
	const rt = await post(`${api}/v1/sandboxes/${s.id}/routes`, { access: ['exec'] })
	const ex = async () => {
		const r = await fetch(`${rt.endpoint}/v1/sandboxes/${s.id}/exec`, { method: 'POST',
			headers: { Authorization: `Bearer ${rt.capability}`, 'Content-Type': 'application/json' },
			body: JSON.stringify({ argv: ARGV }) })
		const j = await r.json()
		if (!r.ok || j.exit_code !== 0) throw new Error(`exec: ${r.status} ${JSON.stringify(j)}`)
	}
	return { id: s.id, ex }
}
const nativeKill = (id) => fetch(`${api}/v1/sandboxes/${id}`, { method: 'DELETE', headers: auth })

const rows = []
const cs = []; const cn = []
for (let i = 0; i < N_CREATE; i++) {
	let t = ms()
	const sbx = await Sandbox.create()
	await sbx.commands.run('true')
	cs.push(ms() - t)
	await sbx.kill()
	t = ms()
	const n = await nativeCreate()
	await n.ex()
	cn.push(ms() - t)
	await nativeKill(n.id)
}
rows.push(['create to first command', median(cs), median(cn)])

const sbx = await Sandbox.create()
const n = await nativeCreate()
await sbx.commands.run('true'); await n.ex()   // warm: routes cached on both sides
const rs = []; const rn = []
for (let i = 0; i < N_RT; i++) {
	let t = ms(); await sbx.commands.run('true'); rs.push(ms() - t)
	t = ms(); await n.ex(); rn.push(ms() - t)
}
rows.push(['command round trip', median(rs), median(rn)])
await sbx.kill(); await nativeKill(n.id)

console.log(`| measure (median, ms) | E2B SDK via space-edge | space native API | ratio |`)
console.log(`|---|---|---|---|`)
for (const [name, a, b] of rows)
	console.log(`| ${name} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(a / b).toFixed(2)} |`)
console.log(`(${N_CREATE} creates, ${N_RT} round trips each; the native client is fetch in the same process)`)
