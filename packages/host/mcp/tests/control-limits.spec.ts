import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost, type Host, type HostOptions } from '@dsh/host'
import { MCP_MAX_CHILDREN, MCP_MAX_CONCURRENT_RUNS } from '@dsh/protocol/limits'
import { subagentControlTools } from '@dsh/tool-subagent-control'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterEach, describe, expect, it } from 'vitest'
import { ControlLimiter, type McpControlLimits } from '../src/index.js'
import { connectClient } from './support.js'

// The control limits over the real runtime: children per parent and runs at
// once. A held driver keeps each run open until the test releases its prompt,
// so what is running is decided by the test, never by timing.

type Driver = NonNullable<HostOptions['driver']>

interface Held {
  readonly driver: Driver
  /** Lets the run whose prompt is `prompt` finish (now, or as soon as it starts). */
  release(prompt: string): void
  /** Prompts of the runs started so far, in order. */
  readonly started: string[]
  /** Resolves once a run with `prompt` has started. */
  whenStarted(prompt: string): Promise<void>
}

function heldDriver(): Held {
  const gates = new Map<string, { open: () => void; opened: Promise<void> }>()
  const gate = (prompt: string) => {
    let entry = gates.get(prompt)
    if (entry === undefined) {
      let open!: () => void
      const opened = new Promise<void>((resolve) => (open = resolve))
      entry = { open, opened }
      gates.set(prompt, entry)
    }
    return entry
  }
  const started: string[] = []
  const starts = new Map<string, () => void>()
  return {
    started,
    release: (prompt) => gate(prompt).open(),
    whenStarted: (prompt) => (started.includes(prompt) ? Promise.resolve() : new Promise<void>((resolve) => starts.set(prompt, resolve))),
    driver: {
      name: 'held',
      async run({ session, turn, signal, prompt = '' }) {
        session.append('turn/start', { turn })
        started.push(prompt)
        starts.get(prompt)?.()
        await Promise.race([gate(prompt).opened, new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))])
        if (signal.aborted) {
          session.append('turn/end', { turn, reason: 'cancelled' })
          return { reason: 'cancelled' }
        }
        const text = `done: ${prompt}`
        session.append('assistant/message', { turn, text })
        session.append('turn/end', { turn, reason: 'completed' })
        return { reason: 'completed', text }
      },
    },
  }
}

let root: string | undefined
let host: Host | undefined
const clients: Client[] = []

async function start(limits: McpControlLimits, driver?: Driver): Promise<Client> {
  root = mkdtempSync(join(tmpdir(), 'dsh-mcp-limits-'))
  host = await createHost({ root, ...(driver === undefined ? {} : { driver }) })
  const client = await connectClient(host.ctx, {
    allowControl: true,
    control: host.subagents,
    controlTools: (control) => subagentControlTools(control),
    limits,
  })
  clients.push(client)
  return client
}

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close()
  await host?.dispose()
  host = undefined
  if (root !== undefined) rmSync(root, { recursive: true, force: true })
})

type Answer = { isError?: boolean; structuredContent?: unknown; content?: unknown }

function codeOf(answer: Answer): string | undefined {
  return answer.isError === true ? (answer.structuredContent as { error: { code: string } }).error.code : undefined
}

async function childIds(parent: string): Promise<string[]> {
  return (await host!.subagents.explainChildren(parent)).map((entry) => entry.row.id)
}

/** Lets the runtime finish settling a child: `wait` returns once it is idle, and a macrotask drains what follows it. */
async function settled(parent: string, ids: string[]): Promise<void> {
  await host!.subagents.wait(ids, { caller: parent })
  await new Promise((resolve) => setImmediate(resolve))
}

describe('MCP control limits', () => {
  it('refuses a spawn past maxChildren with MCP_CHILD_LIMIT, counting children made before the server, and the catalog holds exactly the cap', async () => {
    const client = await start({ maxChildren: 3 })
    const parent = host!.sessions.create()
    const before = host!.subagents.spawn(parent, { mode: 'one-shot', context: 'fresh', prompt: 'made before' })
    await before.done

    const answers: Answer[] = []
    for (let i = 0; i < 4; i++)
      answers.push((await client.callTool({ name: 'subagent', arguments: { session: parent.id, prompt: `task ${i}` } })) as Answer)
    expect(answers.map(codeOf)).toEqual([undefined, undefined, 'MCP_CHILD_LIMIT', 'MCP_CHILD_LIMIT'])
    const refusal = answers[2]!
    expect((refusal.content as { text: string }[])[0]!.text).toMatch(
      new RegExp(`^MCP_CHILD_LIMIT: Session '${parent.id}' has 3 subagents, .*maxChildren 3; dsh mcp --max-children N`),
    )
    expect(await childIds(parent.id)).toHaveLength(3)
  })

  it('admits exactly maxChildren of many concurrent spawns for one parent', async () => {
    const client = await start({ maxChildren: 4, maxConcurrentRuns: 100 })
    const parent = host!.sessions.create()
    const answers = (await Promise.all(
      Array.from({ length: 12 }, (_, i) => client.callTool({ name: 'subagent', arguments: { session: parent.id, prompt: `flood ${i}` } })),
    )) as Answer[]
    const codes = answers.map(codeOf)
    expect(codes.filter((code) => code === undefined)).toHaveLength(4)
    expect(codes.filter((code) => code === 'MCP_CHILD_LIMIT')).toHaveLength(8)
    expect(await childIds(parent.id)).toHaveLength(4)
    // Another parent has its own count.
    const other = host!.sessions.create()
    expect(codeOf((await client.callTool({ name: 'subagent', arguments: { session: other.id, prompt: 'elsewhere' } })) as Answer)).toBe(
      undefined,
    )
  })

  it('refuses a spawn past maxConcurrentRuns with MCP_RUN_LIMIT while runs are held open, and admits one once a run ends', async () => {
    const held = heldDriver()
    const client = await start({ maxChildren: 100, maxConcurrentRuns: 2 }, held.driver)
    const parent = host!.sessions.create()
    const spawn = (prompt: string) =>
      client.callTool({ name: 'subagent', arguments: { session: parent.id, prompt, wait: false } }) as Promise<Answer>

    const first = (await spawn('one')).structuredContent as { id: string; status: string }
    const second = (await spawn('two')).structuredContent as { id: string; status: string }
    expect([first.status, second.status]).toEqual(['running', 'running'])
    const refused = await spawn('three')
    expect(codeOf(refused)).toBe('MCP_RUN_LIMIT')
    expect((refused.content as { text: string }[])[0]!.text).toMatch(
      /^MCP_RUN_LIMIT: 2 subagent runs .*maxConcurrentRuns 2; dsh mcp --max-concurrent-runs N/,
    )
    expect(await childIds(parent.id)).toHaveLength(2)
    expect(held.started).toEqual(['one', 'two'])

    held.release('one')
    await settled(parent.id, [first.id])
    expect(codeOf(await spawn('three'))).toBe(undefined)
    expect(codeOf(await spawn('four'))).toBe('MCP_RUN_LIMIT')
    expect(held.started).toEqual(['one', 'two', 'three'])
    for (const prompt of ['two', 'three']) held.release(prompt)
  })

  it('admits exactly maxConcurrentRuns of many concurrent spawns', async () => {
    const held = heldDriver()
    const client = await start({ maxConcurrentRuns: 3 }, held.driver)
    const parent = host!.sessions.create()
    const answers = (await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        client.callTool({ name: 'subagent', arguments: { session: parent.id, prompt: `flood ${i}`, wait: false } }),
      ),
    )) as Answer[]
    const codes = answers.map(codeOf)
    expect(codes.filter((code) => code === undefined)).toHaveLength(3)
    expect(codes.filter((code) => code === 'MCP_RUN_LIMIT')).toHaveLength(9)
    expect(await childIds(parent.id)).toHaveLength(3)
    expect(held.started).toHaveLength(3)
    for (const prompt of held.started) held.release(prompt)
  })

  it('counts a child until its queued messages have run, and refuses a message that would start an idle child past the cap', async () => {
    const held = heldDriver()
    const client = await start({ maxConcurrentRuns: 1 }, held.driver)
    const parent = host!.sessions.create()
    const call = (name: string, args: Record<string, unknown>) =>
      client.callTool({ name, arguments: { session: parent.id, ...args } }) as Promise<Answer>

    const a = ((await call('subagent', { prompt: 'a1', mode: 'continuable', label: 'a' })).structuredContent as { id: string }).id
    // A message to a busy child queues: never refused.
    expect(await call('send_message', { id: a, message: 'a2' })).toMatchObject({ structuredContent: { status: 'queued' } })
    expect(codeOf(await call('subagent', { prompt: 'b1', wait: false }))).toBe('MCP_RUN_LIMIT')

    held.release('a1')
    // The queued message runs next: the child is still counted.
    await held.whenStarted('a2')
    expect(codeOf(await call('subagent', { prompt: 'b1', wait: false }))).toBe('MCP_RUN_LIMIT')

    held.release('a2')
    await settled(parent.id, [a])
    const b = ((await call('subagent', { prompt: 'b1', mode: 'continuable', label: 'b' })).structuredContent as { id: string }).id
    // a is idle: a message would start a run, and b holds the only slot.
    expect(codeOf(await call('send_message', { id: a, message: 'a3' }))).toBe('MCP_RUN_LIMIT')
    held.release('b1')
    await settled(parent.id, [b])
    expect(await call('send_message', { id: a, message: 'a3' })).toMatchObject({ structuredContent: { status: 'started' } })
    held.release('a3')
    await settled(parent.id, [a])
    expect(held.started).toEqual(['a1', 'a2', 'b1', 'a3'])
  })

  it('takes its defaults from @dsh/protocol/limits and refuses limits that are not positive integers', () => {
    const inner = {} as ConstructorParameters<typeof ControlLimiter>[0]
    const limiter = new ControlLimiter(inner, {}, async () => 0)
    expect([limiter.maxChildren, limiter.maxConcurrentRuns]).toEqual([MCP_MAX_CHILDREN, MCP_MAX_CONCURRENT_RUNS])
    for (const bad of [{ maxChildren: 0 }, { maxConcurrentRuns: -1 }, { maxChildren: 2.5 }])
      expect(() => new ControlLimiter(inner, bad, async () => 0)).toThrow(expect.objectContaining({ code: 'MCP_INVALID_OPTIONS' }))
  })
})
