import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { compactionResult } from '@dsh/protocol'
import { afterEach, describe, expect, it } from 'vitest'
import { createClient, type DshClient } from '../src/index.js'
import { failure } from './failure.js'

// POST /api/sessions/:id/compact through the client against a real host in
// its own process (@dsh/apiproxy's compaction fixture: built packages, zstd
// JSONL files, SQLite index and cache, the compaction service), and another
// process holding a session's writer lock.

const apiproxyRoot = dirname(dirname(realpathSync(createRequire(import.meta.url).resolve('@dsh/apiproxy'))))
const fixture = join(apiproxyRoot, 'tests', 'fixtures', 'compaction-stack.mjs')
const token = 'compaction-e2e-token-0123456789'

interface Process {
  readonly child: ChildProcessWithoutNullStreams
  /** The first JSON line the process printed. */
  readonly first: Promise<Record<string, unknown>>
  /** Closes its stdin (how the fixture is told to stop) and waits for its exit code. */
  stop(): Promise<number | null>
}

const started: Process[] = []
let root: string | undefined

function start(...args: string[]): Process {
  const child = spawn(process.execPath, [fixture, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const first = Promise.race([
    lines.next().then((line) => JSON.parse(String(line.value)) as Record<string, unknown>),
    exited.then((code) => Promise.reject(new Error(`the fixture exited with ${code}: ${stderr}`))),
  ])
  const p: Process = {
    child,
    first,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.stdin.end()
      return exited
    },
  }
  started.push(p)
  return p
}

async function serve(...flags: string[]): Promise<DshClient> {
  root ??= mkdtempSync(join(tmpdir(), 'dsh-client-compaction-'))
  const ready = await start('serve', root, token, ...flags).first
  expect(ready).toMatchObject({ ready: true })
  return createClient({ baseUrl: String(ready.url), token })
}

afterEach(async () => {
  for (const p of started.splice(0).reverse()) expect(await p.stop()).toBe(0)
  if (root !== undefined) rmSync(root, { recursive: true, force: true })
  root = undefined
})

describe('client.compact over real HTTP', () => {
  it('compacts a live and a cold session; the history keeps every event and ends with the compaction', async () => {
    const client = await serve()
    for (const id of ['talk', 'other']) {
      const before = await client.history(id, { limit: 100 })
      const result = await client.compact(id, { keep: 2 })
      expect(compactionResult.parse(result)).toMatchObject({ id, shadowed: 6 })
      expect(result.tokensAfter).toBeLessThan(result.tokensBefore)
      const after = await client.history(id, { limit: 100 })
      expect(after.events.slice(0, before.events.length)).toEqual(before.events)
      expect(after.events.slice(before.events.length).map((e) => [e.type, (e.data as { reason?: unknown }).reason])).toEqual([
        ['compaction/start', 'http'],
        ['compaction/summary', undefined],
        ['compaction/end', undefined],
      ])
    }
    // Nothing is left to shadow with the same keep: a typed 409.
    expect((await failure(client.compact('talk', { keep: 2 }))).toJSON()).toMatchObject({
      code: 'COMPACTION_NOTHING_TO_COMPACT',
      status: 409,
    })
  })

  it('is refused with SESSION_PERSISTENCE_LOCKED (409) while another process writes the session, and compacts once it is gone', async () => {
    root = mkdtempSync(join(tmpdir(), 'dsh-client-compaction-'))
    const holder = start('hold', root, 'held')
    expect(await holder.first).toEqual({ held: 'held' })
    const client = await serve()
    const refused = await failure(client.compact('held'))
    expect(refused.toJSON()).toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED', status: 409 })
    expect(await holder.stop()).toBe(0)
    expect(await client.compact('held')).toMatchObject({ id: 'held', shadowed: 4 })
  })

  it('a host without a compaction service answers a typed 501', async () => {
    const client = await serve('--no-compaction')
    expect((await failure(client.compact('talk'))).toJSON()).toMatchObject({ code: 'API_COMPACTION_UNAVAILABLE', status: 501 })
  })
})
