import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface, type Interface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, type DshClient, type StreamEventBody } from '../src/index.js'
import { failure } from './failure.js'

// The client against a real host in its own process: @dsh/apiproxy's fixture
// server runs the built packages with zstd JSONL files, the SQLite query index
// and projection cache, and the subagent runtime with its scripted driver.
// The fixture is found through this package's dev dependency on @dsh/apiproxy
// (the client itself depends on @dsh/protocol only).

const apiproxyRoot = dirname(dirname(realpathSync(createRequire(import.meta.url).resolve('@dsh/apiproxy'))))
const fixture = join(apiproxyRoot, 'tests', 'fixtures', 'serve-stack.mjs')
const token = 'client-e2e-token-0123456789'

let root: string
let host: ChildProcessWithoutNullStreams
let lines: Interface
let replies: AsyncIterator<string>
let baseUrl: string
let client: DshClient

async function nextLine(): Promise<Record<string, unknown>> {
  const result = await replies.next()
  if (result.done) throw new Error('the host process closed its output')
  return JSON.parse(result.value) as Record<string, unknown>
}

async function command(body: Record<string, unknown>): Promise<void> {
  host.stdin.write(`${JSON.stringify(body)}\n`)
  const reply = await nextLine()
  expect(reply).toMatchObject({ ok: true, op: body.op })
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'dsh-client-e2e-'))
  host = spawn(process.execPath, [fixture, root, token], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  host.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  lines = createInterface({ input: host.stdout })
  replies = lines[Symbol.asyncIterator]()
  const ready = await Promise.race([
    nextLine(),
    new Promise<never>((_, reject) => host.once('exit', (code) => reject(new Error(`the host exited with ${code}: ${stderr}`)))),
  ])
  expect(ready).toMatchObject({ ready: true, token })
  baseUrl = String(ready.url)
  expect(baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
  client = createClient({ baseUrl, token })
})

afterAll(async () => {
  if (host && host.exitCode === null && host.signalCode === null) {
    const exited = new Promise((resolve) => host.once('exit', resolve))
    host.stdin.end()
    await exited
  }
  lines?.close()
  if (root) rmSync(root, { recursive: true, force: true })
})

describe('client over real HTTP', () => {
  it('gets a typed 401 without the token or with a wrong one', async () => {
    for (const wrong of ['', 'wrong-token-0123456789']) {
      const error = await failure(createClient({ baseUrl, token: wrong }).listSessions())
      expect(error.toJSON()).toMatchObject({ code: 'API_UNAUTHORIZED', status: 401 })
    }
    expect((await failure(createClient({ baseUrl, token: 'nope' }).childHistory('parent', 'child-a'))).status).toBe(401)
  })

  it('lists sessions page by page and as one iteration', async () => {
    const first = await client.listSessions({ limit: 2 })
    expect(first.sessions).toHaveLength(2)
    expect(first.nextCursor).toBeTypeOf('string')
    const all: string[] = []
    for await (const record of client.sessions({ limit: 2 })) all.push(record.header.id)
    const whole = (await client.listSessions({ limit: 1000 })).sessions.map((r) => r.header.id)
    expect(all).toEqual(whole)
    expect(whole).toEqual(expect.arrayContaining(['parent', 'other', 'child-a', 'child-b', 'grandchild', 'child-x', '../evil']))
    const children = await client.listSessions({ parentSession: 'parent', origin: 'subagent' })
    expect(children.sessions.map((r) => r.header.id)).toEqual(['child-a', 'child-b'])
  })

  it('reads history of top-level sessions and of children through their parent only', async () => {
    const whole = await client.history('parent', { limit: 1000 })
    expect(whole.events.slice(0, 4).map((e) => e.type)).toEqual(['turn/start', 'user/message', 'assistant/message', 'turn/end'])
    const parentHistory = await client.history('parent', { limit: 2 })
    expect(parentHistory.events).toEqual(whole.events.slice(-2))
    expect(parentHistory.nextBefore).toBe(whole.total - 2)
    const direct = await failure(client.history('child-a'))
    expect(direct.toJSON()).toMatchObject({ code: 'API_FORBIDDEN', status: 403 })
    const child = await client.childHistory('parent', 'child-a')
    expect(child.header).toMatchObject({ id: 'child-a', origin: 'subagent', parentSession: 'parent' })
    expect(child.events.map((e) => e.type)).toContain('subagent/descriptor')
  })

  it('gets a typed 404 and no event data through the wrong parent', async () => {
    for (const [parentId, childId, secret] of [
      ['other', 'child-a', 'finished summarize'],
      ['parent', 'child-x', 'secret words'],
      ['parent', 'grandchild', 'dig deeper'],
    ] as const) {
      const error = await failure(client.childHistory(parentId, childId))
      expect(error.toJSON()).toMatchObject({ code: 'API_NOT_FOUND', status: 404 })
      expect(JSON.stringify(error.toJSON())).not.toContain(secret)
    }
  })

  it('round-trips awkward ids and refuses the ones that cannot travel', async () => {
    for (const id of ['../evil', 'a/b', '100%', '%2E%2E', 'a/../b', '会话 🚀']) {
      const page = await client.history(id)
      expect(page.header.id).toBe(id)
      expect(page.events.some((e) => (e.data as { text?: string }).text === `hello from ${id}`)).toBe(true)
    }
    // Values past the protocol's bounds are refused before sending: the client builds requests from the same route table the host reads them with.
    expect((await failure(client.history('x'.repeat(10 * 1024)))).toJSON()).toMatchObject({ code: 'CLIENT_INVALID_ARGUMENT', status: 0 })
    expect((await failure(client.history('nul\u0000id'))).toJSON()).toMatchObject({ code: 'CLIENT_INVALID_ARGUMENT', status: 0 })
    expect((await failure(client.search({ q: Array.from({ length: 17 }, (_, i) => `w${i}`).join(' ') }))).toJSON()).toMatchObject({
      code: 'CLIENT_INVALID_ARGUMENT',
      status: 0,
    })
    expect((await failure(client.history('..'))).toJSON()).toMatchObject({ code: 'CLIENT_INVALID_ARGUMENT', status: 0 })
    expect((await failure(client.history('never-created'))).toJSON()).toMatchObject({ code: 'SESSION_QUERY_NOT_FOUND', status: 404 })
  })

  it('lists the subagent tree with typed rows', async () => {
    const list = await client.subagents('parent', { scope: 'descendants' })
    expect(list.rows.map((r) => [r.id, r.kind, r.parentId, r.depth])).toEqual([
      ['child-a', 'child', 'parent', 1],
      ['child-b', 'child', 'parent', 1],
      ['grandchild', 'child', 'child-b', 2],
    ])
    const [a, b] = list.rows
    expect(a).toMatchObject({ mode: 'one-shot', label: 'summarizer', activity: 'inactive' })
    expect(b).toMatchObject({ mode: 'continuable', label: 'researcher', activity: 'running', hasChildren: true })
  })

  it('searches the SQLite index', async () => {
    const sessions = await client.search({ q: 'plan' })
    expect(sessions.kind).toBe('sessions')
    expect(sessions.hits.map((h) => h.record.header.id)).toContain('parent')
    const events = await client.search({ q: 'unrelated', kind: 'events' })
    expect(events.hits.some((h) => h.id === 'other')).toBe(true)
  })

  it('streams catalog changes while a child runs and finishes', async () => {
    const controller = new AbortController()
    const seen: StreamEventBody[] = []
    const waiters: Array<{ match: (e: StreamEventBody) => boolean; resolve: () => void }> = []
    const consumed = (async () => {
      for await (const event of client.stream('parent', { signal: controller.signal })) {
        seen.push(event)
        for (const waiter of waiters.splice(0)) {
          if (waiter.match(event)) waiter.resolve()
          else waiters.push(waiter)
        }
      }
    })()
    const waitFor = (match: (e: StreamEventBody) => boolean) =>
      seen.some(match) ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ match, resolve }))
    const catalog = (reason: string) => (e: StreamEventBody) =>
      e.event === 'catalog' && e.data.childId === 'late' && e.data.reason === reason

    await waitFor((e) => e.event === 'ready')
    await command({ op: 'spawn', parent: 'parent', id: 'late', label: 'late arrival', hold: true })
    await waitFor(catalog('created'))
    expect((await client.subagents('parent')).rows.find((r) => r.id === 'late')).toMatchObject({ activity: 'running' })
    await command({ op: 'release', id: 'late' })
    await waitFor(catalog('disposed'))
    expect((await client.subagents('parent')).rows.find((r) => r.id === 'late')).toMatchObject({
      activity: 'inactive',
      label: 'late arrival',
    })
    controller.abort()
    await consumed
    expect(seen.filter((e) => e.event === 'catalog').map((e) => (e.event === 'catalog' ? e.data.reason : ''))).toEqual(
      expect.arrayContaining(['created', 'turn-end', 'disposed']),
    )
  })

  it('reports CLIENT_NETWORK once the host is killed with SIGKILL', async () => {
    const exited = new Promise((resolve) => host.once('exit', resolve))
    host.kill('SIGKILL')
    await exited
    expect((await failure(client.listSessions())).toJSON()).toMatchObject({ code: 'CLIENT_NETWORK', status: 0 })
  })
})
