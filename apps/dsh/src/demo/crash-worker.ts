#!/usr/bin/env node
/**
 * Phase 0 of `dsh demo`, run as a separate process that the demo then kills
 * with SIGKILL: it writes the parent session, a one-shot child that completes
 * (its log is corrupted afterwards) and a continuable child whose turn is
 * still open when the process dies. It runs without the projection cache, as
 * another runtime might, so no checkpoint of these children exists.
 */
import { createHost } from '@dsh/host'
import { createScriptedDriver } from '@dsh/subagent'
import { DEMO_IDS } from './ids.js'
import { demoScript } from './scripts.js'

const root = process.argv[2]
if (root === undefined) {
  console.error('usage: crash-worker <root>')
  process.exit(2)
}
const host = await createHost({
  root,
  projectionCache: false,
  query: 'memory',
  driver: createScriptedDriver(demoScript(new Promise(() => {}))),
})
const parent = host.sessions.create({ id: DEMO_IDS.parent, cwd: host.root })
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
