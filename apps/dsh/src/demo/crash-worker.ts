#!/usr/bin/env node
/**
 * Phase 0 of `dsh demo`, run as a separate process that the demo then kills
 * with SIGKILL (over a root or a PostgreSQL store): it writes the parent session, a one-shot child that completes
 * (its log is corrupted afterwards) and a continuable child whose turn is
 * still open when the process dies. It runs without the projection cache, as
 * another runtime might, so no checkpoint of these children exists.
 */
import { createHost, type HostOptions } from '@dsh/host'
import { createScriptedDriver } from '@dsh/subagent'
import { DEMO_IDS } from './ids.js'
import { demoScript } from './scripts.js'
import { CRASH_WORKER_APPLICATION, CRASH_WORKER_STORE_ENV } from './worker-env.js'

// `crash-worker root <dir>`, or `crash-worker store` with the URL in DSH_DEMO_STORE (argv shows in ps).
const [kind, root] = process.argv.slice(2)
const store = process.env[CRASH_WORKER_STORE_ENV]
let place: Pick<HostOptions, 'root' | 'postgres'>
if (kind === 'root' && root !== undefined) place = { root }
else if (kind === 'store' && store !== undefined && store !== '') {
  // Named connections: the demo waits for them to be gone after the SIGKILL (the server then has freed the leases).
  const [{ default: pg }, { poolConfig }] = await Promise.all([import('pg'), import('@dsh/session-persistence-postgres')])
  place = { postgres: { pool: new pg.Pool({ ...poolConfig(store), application_name: CRASH_WORKER_APPLICATION }) } }
} else {
  console.error(`usage: crash-worker root <dir> | crash-worker store (URL in ${CRASH_WORKER_STORE_ENV})`)
  process.exit(2)
}
const host = await createHost({
  ...place,
  projectionCache: false,
  query: 'memory',
  driver: createScriptedDriver(demoScript(new Promise(() => {}))),
})
// A root's sessions start in the root; a store's in the demo's working directory.
const parent = host.sessions.create({ id: DEMO_IDS.parent, cwd: root ?? process.cwd() })
parent.append('user/message', { text: 'Ship release 1.4: check the build, migrate the database, research and review.' })
parent.append('turn/start', { turn: 1 })
parent.append('assistant/message', { turn: 1, text: 'Delegating to subagents.' })
parent.append('turn/end', { turn: 1, reason: 'completed' })
const summarizer = host.subagents.spawn(parent, {
  id: DEMO_IDS.corrupt,
  mode: 'one-shot',
  label: 'log-summarizer',
  context: 'fresh',
  prompt: 'Summarize build.log',
})
await summarizer.done
const migration = host.subagents.spawn(parent, {
  id: DEMO_IDS.crashed,
  mode: 'continuable',
  label: 'migration-runner',
  context: 'fresh',
  prompt: 'Apply pending migrations',
})
// Wait until the child is inside its turn (its tool call is appended), then make everything durable.
while (!migration.session.events.some((e) => e.type === 'tool/result')) await new Promise((r) => setTimeout(r, 2))
await host.sessions.flush(migration.session)
await host.sessions.flush(parent)
process.stdout.write('READY\n')
// Wait to be killed.
setInterval(() => {}, 1 << 30)
