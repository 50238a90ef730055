import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Context } from '@dsh/context'
import { type Session, type SessionId, type SessionStore, type StoredSessionEvent, sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { createSessionQuery } from '@dsh/session-query'
import {
  createScriptedDriver,
  type ScriptStep,
  type SubagentNotice,
  type SubagentRun,
  type SubagentRuntime,
  type SubagentTool,
  subagentsPlugin,
} from '@dsh/subagent'
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createListAgentsTool, subagentControlTools } from '../src/index.js'

const here = dirname(fileURLToPath(import.meta.url))

let root: string
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'dsh-delegation-'))
})
afterEach(() => {
  rmSync(root, { recursive: true, force: true })
})

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void
  const promise = new Promise<void>((resolve) => (open = resolve))
  return { promise, open }
}
const never = new Promise<never>(() => {})

interface Host {
  readonly ctx: Context
  readonly sessions: SessionStore
  readonly runtime: SubagentRuntime
  /** Every run the driver saw, in order. */
  readonly runs: SubagentRun[]
}

/**
 * The delegating parent and its three children, scripted as a model would
 * act: the parent only calls the control tools, the children only run their
 * turns (the watcher reports first). `openReviewer` is the one test
 * instrument: a tool the parent calls once it has queued a message for the
 * busy reviewer, which lets the reviewer's first turn finish.
 */
function script(run: SubagentRun, reviewerGate: Promise<void>): ScriptStep[] {
  const label = run.identity?.label
  if (label === undefined && run.prompt === 'plan') {
    const idOf = (previous: readonly { content: unknown }[], i: number): string => (previous[i]!.content as { id: string }).id
    return [
      { kind: 'call', name: 'subagent', arguments: { prompt: 'count the TODOs', label: 'counter' } },
      { kind: 'call', name: 'subagent', arguments: { prompt: 'review the diff', label: 'reviewer', mode: 'continuable', context: 'fork' } },
      { kind: 'call', name: 'subagent', arguments: { prompt: 'watch the build', label: 'watcher', mode: 'continuable' } },
      { kind: 'call', name: 'send_message', arguments: (previous) => ({ id: idOf(previous, 1), message: 'also check the tests' }) },
      { kind: 'call', name: 'open_reviewer' },
      { kind: 'call', name: 'wait_agents', arguments: (previous) => ({ ids: [idOf(previous, 0), idOf(previous, 1)] }) },
      { kind: 'message', text: 'delegated' },
    ]
  }
  if (label === undefined && run.prompt === 'follow up') {
    const watcher = run.notices.find((n) => n.kind === 'report')!.child
    const reviewer = run.notices.find((n) => n.kind === 'settled' && n.label === 'reviewer')!.child
    return [
      { kind: 'call', name: 'interrupt_agent', arguments: { id: watcher } },
      { kind: 'call', name: 'wait_agents', arguments: { ids: [watcher] } },
      { kind: 'call', name: 'close_agent', arguments: { id: reviewer } },
      { kind: 'message', text: 'closed the reviewer' },
    ]
  }
  if (label === 'counter') return [{ kind: 'message', text: '3 TODOs' }]
  if (label === 'reviewer' && run.kind === 'spawn')
    return [
      { kind: 'chunk', text: 'reading' },
      { kind: 'until', promise: reviewerGate },
      { kind: 'message', text: 'diff looks fine' },
    ]
  if (label === 'watcher' && run.kind === 'spawn')
    return [
      { kind: 'call', name: 'report', arguments: { message: 'build is green so far' } },
      { kind: 'until', promise: never },
    ]
  return [{ kind: 'message', text: `${label ?? 'parent'}: ${run.prompt ?? ''}` }]
}

async function open(): Promise<Host> {
  const ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionPersistencePlugin(createJsonlPersistence({ root }), { writeBehindMs: 0 }))
  ctx.provide('sessionQuery', createSessionQuery({ sessions: ctx.require('sessions'), persistence: ctx.require('sessionPersistence') }))
  const runs: SubagentRun[] = []
  const reviewerGate = gate()
  const openReviewer: SubagentTool = {
    name: 'open_reviewer',
    description: 'test instrument',
    jsonSchema: {},
    execute: async () => {
      reviewerGate.open()
      return { text: 'ok' }
    },
  }
  const scripted = createScriptedDriver((run) => script(run, reviewerGate.promise))
  await ctx.activate(
    subagentsPlugin({
      driver: {
        name: 'scripted',
        run(run) {
          runs.push(run)
          return scripted.run(run)
        },
      },
      tools: (_agent, runtime) => [...subagentControlTools(runtime), openReviewer],
    }),
  )
  return { ctx, sessions: ctx.require('sessions'), runtime: ctx.require('subagents'), runs }
}

async function restoreParent(h: Host, id: string): Promise<Session> {
  return h.sessions.restore(await h.ctx.require('sessionPersistence').load(id as SessionId))
}

async function logOf(h: Host, id: string): Promise<readonly StoredSessionEvent[]> {
  return (await h.ctx.require('sessionPersistence').inspect(id as SessionId)).events
}

const lifecycle = (events: readonly StoredSessionEvent[]) =>
  events.filter((e) => e.type.startsWith('subagent/')).map((e) => [e.type, e.data])
const noticesFrom = (events: readonly StoredSessionEvent[], child: string) =>
  events.filter((e) => e.type === 'subagent/notice' && (e.data as unknown as SubagentNotice).child === child).map((e) => e.data)

/** Every tool call in the log has exactly one result. */
function danglingCalls(events: readonly StoredSessionEvent[]): string[] {
  const calls = events.filter((e) => e.type === 'tool/call').map((e) => (e.data as { callId: string }).callId)
  const results = events.filter((e) => e.type === 'tool/result').map((e) => (e.data as { callId: string }).callId)
  return calls.filter((id) => results.filter((r) => r === id).length !== 1)
}

/** Resolves once `session`'s log holds an event matching `test` (already there, or when it is appended). */
function eventuallyLogged(ctx: Context, session: Session, test: (event: StoredSessionEvent) => boolean): Promise<void> {
  if (session.events.some(test)) return Promise.resolve()
  return new Promise((resolve) => {
    const off = ctx.on('session/event', (s, event) => {
      if (s === session && test(event)) {
        off()
        resolve()
      }
    })
  })
}

describe('delegation end to end, over real JSONL files and two restarts', () => {
  it('a parent delegates, queues, waits, hears a report, interrupts, closes; the catalog, lifecycle events and notices agree after each restart', async () => {
    // ── Process 1 ──────────────────────────────────────────────────────────
    const first = await open()
    const parent = first.sessions.create({ id: 'parent' })
    await first.runtime.drive(parent, { prompt: 'plan' }).done
    const turn1 = first.runs[0]!
    expect(turn1.tools.map((t) => t.name)).toEqual([
      'subagent',
      'send_message',
      'wait_agents',
      'interrupt_agent',
      'close_agent',
      'report',
      'list_agents',
      'open_reviewer',
    ])
    const results = parent.events
      .filter((e) => e.type === 'tool/result')
      .map((e) => e.data as { content: Record<string, unknown>; isError?: boolean })
    expect(results.every((r) => r.isError !== true)).toBe(true)
    const [counter, reviewer, watcher] = results.slice(0, 3).map((r) => r.content.id as string)
    expect(results[0]!.content).toMatchObject({ status: 'completed', mode: 'one-shot', label: 'counter', result: '3 TODOs' })
    expect(results[1]!.content).toMatchObject({ status: 'running', mode: 'continuable', label: 'reviewer' })
    expect(results[2]!.content).toMatchObject({ status: 'running', mode: 'continuable', label: 'watcher' })
    // The reviewer was busy: the message was queued, then delivered after its turn.
    expect(results[3]!.content).toMatchObject({ id: reviewer, status: 'queued', position: 1 })
    expect(results[5]!.content.agents).toEqual([
      { id: counter, state: 'settled', reason: 'completed', text: '3 TODOs' },
      { id: reviewer, state: 'settled', reason: 'completed', text: 'reviewer: also check the tests' },
    ])
    const reviewerRuns = first.runs.filter((run) => run.session.id === reviewer).map((run) => [run.kind, run.prompt])
    expect(reviewerRuns).toEqual([
      ['spawn', 'review the diff'],
      ['message', 'also check the tests'],
    ])
    // The forked reviewer inherited the parent's log up to the turn the parent was in.
    const forked = await first.ctx.require('sessionPersistence').inspect(reviewer as SessionId)
    expect(forked.header).toMatchObject({ isSeeded: true, parentSession: 'parent', origin: 'subagent' })
    expect(forked.inheritedEventCount).toBe(1)
    expect(forked.events.slice(0, 2)).toMatchObject([
      { type: 'user/message', data: { text: 'plan' } },
      { type: 'subagent/descriptor', data: { mode: 'continuable', label: 'reviewer' } },
    ])

    // The watcher reported; an unrelated session may not interrupt it.
    await eventuallyLogged(first.ctx, parent, (e) => e.type === 'subagent/notice' && (e.data as { kind: string }).kind === 'report')
    const stranger = first.sessions.create({ id: 'stranger' })
    const interrupt = subagentControlTools(first.runtime, { filter: ['interrupt_agent'] })[0]!
    await expect(interrupt.execute({ id: watcher }, { agent: stranger })).rejects.toMatchObject({ code: 'SUBAGENT_UNAUTHORIZED' })
    expect(first.runtime.isRunning(watcher!)).toBe(true)

    // Turn 2: the parent sees the notices as input, interrupts the watcher, closes the reviewer.
    await first.runtime.drive(parent, { prompt: 'follow up' }).done
    const turn2 = first.runs.findLast((run) => run.session === parent)!
    expect(turn2.notices.map((n) => [n.kind, n.child])).toEqual(
      expect.arrayContaining([
        ['settled', reviewer],
        ['report', watcher],
      ]),
    )
    const turn2Results = parent.events
      .filter((e) => e.type === 'tool/result')
      .slice(6)
      .map((e) => (e.data as { content: Record<string, unknown> }).content)
    expect(turn2Results).toMatchObject([
      { id: watcher, interrupted: true },
      { agents: [{ id: watcher, state: 'settled', reason: 'cancelled' }] },
      { id: reviewer, interrupted: false, dropped: 0 },
    ])
    await first.ctx.dispose()

    // ── Restart 1 ──────────────────────────────────────────────────────────
    const second = await open()
    const expectedRows = [
      { kind: 'child', id: counter, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'counter' },
      { kind: 'child', id: reviewer, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'reviewer' },
      { kind: 'child', id: watcher, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'watcher' },
    ]
    expect(await second.runtime.listChildren('parent')).toEqual(expectedRows)
    const counterLog = await logOf(second, counter!)
    expect(lifecycle(counterLog).map(([type]) => type)).toEqual(['subagent/descriptor', 'subagent/start', 'subagent/end'])
    expect(lifecycle(counterLog).at(-1)).toEqual(['subagent/end', { turn: 1, reason: 'completed', text: '3 TODOs' }])
    const reviewerEvents = await logOf(second, reviewer!)
    const queuedSeq = reviewerEvents.find((e) => e.type === 'subagent/queued')!.seq
    expect(lifecycle(reviewerEvents).slice(1)).toEqual([
      ['subagent/start', { kind: 'spawn', turn: expect.any(Number) }],
      ['subagent/queued', { from: 'parent', text: 'also check the tests' }],
      ['subagent/end', { turn: expect.any(Number), reason: 'completed', text: 'diff looks fine' }],
      ['subagent/start', { kind: 'message', turn: expect.any(Number), queued: queuedSeq }],
      ['subagent/end', { turn: expect.any(Number), reason: 'completed', text: 'reviewer: also check the tests' }],
      ['subagent/end', { reason: 'closed' }],
    ])
    const watcherEvents = await logOf(second, watcher!)
    expect(lifecycle(watcherEvents).slice(1)).toEqual([
      ['subagent/start', { kind: 'spawn', turn: 1 }],
      ['subagent/end', { turn: 1, reason: 'cancelled' }],
    ])
    const parentEvents = await logOf(second, 'parent')
    expect(noticesFrom(parentEvents, counter!)).toEqual([
      { kind: 'settled', child: counter, mode: 'one-shot', label: 'counter', reason: 'completed', text: '3 TODOs' },
    ])
    expect(noticesFrom(parentEvents, reviewer!)).toEqual([
      { kind: 'settled', child: reviewer, mode: 'continuable', label: 'reviewer', reason: 'completed', text: 'diff looks fine' },
      {
        kind: 'settled',
        child: reviewer,
        mode: 'continuable',
        label: 'reviewer',
        reason: 'completed',
        text: 'reviewer: also check the tests',
      },
    ])
    expect(noticesFrom(parentEvents, watcher!)).toEqual([
      { kind: 'report', child: watcher, mode: 'continuable', label: 'watcher', text: 'build is green so far' },
      { kind: 'settled', child: watcher, mode: 'continuable', label: 'watcher', reason: 'cancelled' },
    ])
    expect(danglingCalls(parentEvents)).toEqual([])
    // Durable state after the restart: the reviewer stays closed, the watcher takes more work.
    const parent2 = await restoreParent(second, 'parent')
    expect(await second.runtime.wait([counter!, reviewer!, watcher!], { caller: parent2 })).toEqual([
      { id: counter, state: 'settled', reason: 'completed', text: '3 TODOs' },
      { id: reviewer, state: 'closed' },
      { id: watcher, state: 'settled', reason: 'cancelled' },
    ])
    const tools = subagentControlTools(second.runtime)
    const send = tools.find((t) => t.name === 'send_message')!
    await expect(send.execute({ id: reviewer, message: 'one more thing' }, { agent: parent2 })).rejects.toMatchObject({
      code: 'SUBAGENT_CLOSED',
    })
    expect(await send.execute({ id: watcher, message: 'resume please' }, { agent: parent2 })).toMatchObject({ status: 'started' })
    await second.runtime.wait([watcher!], { caller: parent2 })
    await second.ctx.dispose()

    // ── Restart 2 ──────────────────────────────────────────────────────────
    const third = await open()
    expect(await third.runtime.listChildren('parent')).toEqual(expectedRows)
    expect(lifecycle(await logOf(third, watcher!)).slice(-2)).toEqual([
      ['subagent/start', { kind: 'resume', turn: 2 }],
      ['subagent/end', { turn: 2, reason: 'completed', text: 'watcher: resume please' }],
    ])
    expect(noticesFrom(await logOf(third, 'parent'), watcher!).at(-1)).toEqual({
      kind: 'settled',
      child: watcher,
      mode: 'continuable',
      label: 'watcher',
      reason: 'completed',
      text: 'watcher: resume please',
    })
    const parent3 = await restoreParent(third, 'parent')
    const listed = await createListAgentsTool(third.runtime, { format: 'table' }).execute({}, { agent: parent3 })
    expect(listed.text).toBe(
      [
        `${counter}  ready  one-shot  "counter"`,
        `${reviewer}  closed  continuable  "reviewer"`,
        `${watcher}  idle  continuable  "watcher"`,
      ].join('\n'),
    )
    // As the model sees it: the continuable children, both in storage only; the reviewer closed for good.
    const seen = await createListAgentsTool(third.runtime).execute({}, { agent: parent3 })
    expect(seen.text).toBe([`${reviewer} [closed] — reviewer`, `${watcher} [ready] — watcher`].join('\n'))
    await third.ctx.dispose()
  })
})

describe('SIGKILL mid tool call', () => {
  beforeAll(() => {
    // The worker runs the built packages (it imports them by name, resolved to dist/).
    if (!existsSync(join(here, '..', 'dist', 'index.js')))
      throw new Error('Build first: npx turbo run build --filter=@dsh/tool-subagent-control...')
  })

  it('load leaves no dangling tool call (a synthetic error result, then the interrupted end), and the catalog still lists the child', async () => {
    const worker = spawn(process.execPath, [join(here, 'workers', 'killed-mid-tool.mjs'), root], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    worker.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    const exited = new Promise<NodeJS.Signals | null>((resolve) => worker.on('close', (_code, signal) => resolve(signal)))
    const line = await new Promise<string>((resolve, reject) => {
      let buffered = ''
      worker.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        buffered += chunk
        const at = buffered.indexOf('\n')
        if (at !== -1) resolve(buffered.slice(0, at))
      })
      worker.on('close', () => reject(new Error(`worker exited early: ${stderr}`)))
    })
    const [, parentId, childId] = line.split(' ')
    expect(line.startsWith('in-tool ')).toBe(true)
    worker.kill('SIGKILL')
    expect(await exited).toBe('SIGKILL')

    const persistence = createJsonlPersistence({ root })
    try {
      const before = (await persistence.inspect(parentId as SessionId)).events
      const open = before.filter((e) => e.type === 'tool/call').at(-1)!
      expect(open.data).toMatchObject({ name: 'wait_agents' })
      expect(danglingCalls(before)).toEqual([(open.data as { callId: string }).callId])
      const loaded = await persistence.load(parentId as SessionId)
      expect(danglingCalls(loaded.events)).toEqual([])
      expect(loaded.events.slice(before.length)).toMatchObject([
        {
          type: 'tool/result',
          data: { callId: (open.data as { callId: string }).callId, isError: true, content: { code: 'TOOL_INTERRUPTED' } },
        },
        { type: 'turn/end', data: { reason: 'interrupted' } },
      ])
      const child = await persistence.load(childId as SessionId)
      expect(child.events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'interrupted' } })
    } finally {
      await persistence.close()
    }
    const h = await open()
    expect(await h.runtime.listChildren(parentId!)).toEqual([
      { kind: 'child', id: childId, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'migrator' },
    ])
    await h.ctx.dispose()
  })
})
