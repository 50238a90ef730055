// Host A: spawns and runs children under a live parent, prints its catalog,
// then stays alive holding the parent's writer lease until it is killed.
import { composePostgresHost } from './compose.mjs'

const [url] = process.argv.slice(2)
const host = await composePostgresHost(url, 'a')
const parent = host.sessions.create({ id: 'parent-on-a', cwd: '/work' })
parent.append('user/message', { text: 'delegate some work' })
const spawned = [
  host.subagents.spawn(parent, { mode: 'one-shot', label: 'scout', context: 'fresh', prompt: 'look around' }),
  host.subagents.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh', prompt: 'help' }),
  host.subagents.spawn(parent, { mode: 'one-shot', context: 'fork', prompt: 'fork of the parent' }),
]
await Promise.all(spawned.map((handle) => handle.done))
// Children went cold: their logs are flushed and their final checkpoints written.
await host.cache.idle()
await host.sessions.flush(parent)
console.log(`rows ${JSON.stringify(await host.subagents.listChildren(parent.id))}`)
console.log(`children ${JSON.stringify(spawned.map((handle) => handle.id))}`)
setInterval(() => {}, 1 << 30)
