import { isDshError } from '@dsh/context'
import type { Session, StoredSessionEvent } from '@dsh/session'
import { createMemoryPersistence, MemoryPersistenceStorage } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver, type SubagentDriver, type SubagentRun, type SubagentTool } from '../src/index.js'
import { codeOf, createHost, gate, type Host, holdScript, hostsPerTest } from './helpers.js'

const { open: host } = hostsPerTest()

function types(events: readonly StoredSessionEvent[], prefix = 'subagent/'): string[] {
  return events.filter((e) => e.type.startsWith(prefix)).map((e) => e.type)
}

/** A driver whose runs hold until the gate for their prompt opens; records every run it saw. */
function gatedDriver(): { driver: SubagentDriver; runs: SubagentRun[]; hold: (prompt: string) => () => void } {
  const gates = new Map<string, ReturnType<typeof gate>>()
  const runs: SubagentRun[] = []
  const hold = (prompt: string): (() => void) => {
    const g = gate()
    gates.set(prompt, g)
    return g.open
  }
  const scripted = createScriptedDriver((run) => {
    const g = run.prompt === undefined ? undefined : gates.get(run.prompt)
    return g === undefined ? [{ kind: 'message', text: `re: ${run.prompt ?? ''}` }] : holdScript(g.promise)
  })
  return {
    runs,
    hold,
    driver: {
      name: 'gated',
      run(run) {
        runs.push(run)
        return scripted.run(run)
      },
    },
  }
}

describe('send: queued input for a busy child', () => {
  it('queues in order behind the running turn and delivers one run per message, logged on the child', async () => {
    const { driver, runs, hold } = gatedDriver()
    const h = await host({ driver })
    const parent = h.sessions.create({ id: 'parent' })
    const release = hold('first')
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'worker', context: 'fresh', prompt: 'first', id: 'kid' })
    expect(await h.runtime.send('kid', { caller: parent, text: 'second' })).toEqual({ status: 'queued', position: 1 })
    expect(await h.runtime.send('kid', { caller: parent, text: 'third' })).toEqual({ status: 'queued', position: 2 })
    expect(h.runtime.queuedCount('kid')).toBe(2)
    release()
    expect((await child.done).end).toBe('completed')
    const [entry] = await h.runtime.wait(['kid'], { caller: parent })
    expect(entry).toEqual({ id: 'kid', state: 'settled', reason: 'completed', text: 're: third' })
    expect(runs.map((r) => [r.kind, r.prompt])).toEqual([
      ['spawn', 'first'],
      ['message', 'second'],
      ['message', 'third'],
    ])
    const stored = (await h.persistence!.inspect('kid' as never)).events
    const queued = stored.filter((e) => e.type === 'subagent/queued')
    expect(queued.map((e) => e.data)).toEqual([
      { from: 'parent', text: 'second' },
      { from: 'parent', text: 'third' },
    ])
    expect(stored.filter((e) => e.type === 'subagent/start').map((e) => e.data)).toEqual([
      { kind: 'spawn', turn: 1 },
      { kind: 'message', turn: 2, queued: queued[0]!.seq },
      { kind: 'message', turn: 3, queued: queued[1]!.seq },
    ])
    // One settlement notice per run on the parent, in order.
    expect(parent.events.filter((e) => e.type === 'subagent/notice').map((e) => (e.data as { text?: string }).text)).toEqual([
      'finished',
      're: second',
      're: third',
    ])
  })

  it('starts an idle child at once, and refuses strangers, one-shot, unknown and closed children with their codes', async () => {
    const h = await host()
    const parent = h.sessions.create()
    const stranger = h.sessions.create()
    const helper = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh' })
    await helper.done
    const sent = await h.runtime.send(helper.id, { caller: parent, text: 'again' })
    expect(sent.status).toBe('started')
    if (sent.status === 'started') expect((await sent.handle.done).text).toBe('Done: again')
    expect(await codeOf(h.runtime.send(helper.id, { caller: stranger, text: 'x' }))).toBe('SUBAGENT_UNAUTHORIZED')
    const once = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh' })
    await once.done
    expect(await codeOf(h.runtime.send(once.id, { caller: parent, text: 'x' }))).toBe('SUBAGENT_NOT_RESUMABLE')
    expect(await codeOf(h.runtime.send('ghost', { caller: parent, text: 'x' }))).toBe('SUBAGENT_NOT_FOUND')
    await h.runtime.close(helper.id, { caller: parent })
    expect(await codeOf(h.runtime.send(helper.id, { caller: parent, text: 'x' }))).toBe('SUBAGENT_CLOSED')
    expect(await codeOf(h.runtime.resume(helper.id, { caller: parent }))).toBe('SUBAGENT_CLOSED')
  })

  it('delivers input queued before a crash on the next resume, before the new prompt', async () => {
    const storage = new MemoryPersistenceStorage()
    const { driver, runs } = gatedDriver()
    const first = await createHost({ storage, driver })
    const parent = first.sessions.create({ id: 'p' })
    // What a crashed process leaves: a continuable child with input queued but never delivered.
    const child = first.sessions.create({ id: 'c', origin: 'subagent', parentSession: 'p', delegationDepth: 1 })
    child.append('subagent/descriptor', { version: 2, mode: 'continuable', provider: 'gated', label: 'worker' })
    child.append('subagent/start', { kind: 'spawn', turn: 1 })
    child.append('turn/start', { turn: 1 })
    child.append('subagent/queued', { from: 'p', text: 'left behind' })
    child.append('turn/end', { turn: 1, reason: 'interrupted' })
    await first.sessions.dispose('c')
    await first.sessions.dispose(parent.id)
    await first.dispose()
    const h = await host({ storage, driver })
    const live = h.sessions.restore(await h.persistence!.load('p' as never))
    const handle = await h.runtime.resume('c', { caller: live, prompt: 'new' })
    await h.runtime.wait(['c'], { caller: live })
    expect(runs.map((r) => [r.kind, r.prompt])).toEqual([
      ['message', 'left behind'],
      ['message', 'new'],
    ])
    expect((await handle.done).text).toBe('re: left behind')
  })
})

describe('interrupt, close, wait: parent or ancestor only', () => {
  it('lets the parent and a grandparent through an ordinary fork interrupt, and refuses an unrelated session', async () => {
    const hold = gate()
    const h = await host({
      driver: createScriptedDriver((run) =>
        run.identity?.label === 'held' ? holdScript(hold.promise) : [{ kind: 'message', text: 'ok' }],
      ),
    })
    const top = h.sessions.create({ id: 'top' })
    // An ordinary (non-subagent) session between the top and the child: a plain fork.
    const middle = h.sessions.fork(top, { childId: 'middle' })
    const child = h.runtime.spawn(middle, { mode: 'continuable', label: 'held', context: 'fresh', id: 'held' })
    const stranger = h.sessions.create({ id: 'stranger' })
    expect(await codeOf(h.runtime.interrupt('held', { caller: stranger }))).toBe('SUBAGENT_UNAUTHORIZED')
    expect(await codeOf(h.runtime.interrupt('held', { caller: 'not-live' }))).toBe('SUBAGENT_UNAUTHORIZED')
    expect(await codeOf(h.runtime.interrupt('nobody', { caller: top }))).toBe('SUBAGENT_NOT_FOUND')
    expect(await codeOf(h.runtime.interrupt('middle', { caller: top }))).toBe('SUBAGENT_NOT_FOUND') // not a subagent
    expect(h.runtime.isRunning('held')).toBe(true)
    expect(await h.runtime.interrupt('held', { caller: top })).toBe(true)
    expect((await child.done).end).toBe('cancelled')
    expect(await h.runtime.interrupt('held', { caller: middle })).toBe(false)
    expect(await codeOf(h.runtime.wait(['held'], { caller: stranger }))).toBe('SUBAGENT_UNAUTHORIZED')
    expect(await codeOf(h.runtime.close('held', { caller: stranger }))).toBe('SUBAGENT_UNAUTHORIZED')
  })

  it('close interrupts a running child, drops its queue, writes the final end; a cold child closes too', async () => {
    const hold = gate()
    const h = await host({
      driver: createScriptedDriver((run) => (run.prompt === 'hold' ? holdScript(hold.promise) : [{ kind: 'message', text: 'ok' }])),
    })
    const parent = h.sessions.create()
    const busy = h.runtime.spawn(parent, { mode: 'continuable', label: 'busy', context: 'fresh', prompt: 'hold' })
    await h.runtime.send(busy.id, { caller: parent, text: 'never delivered' })
    expect(await h.runtime.close(busy.id, { caller: parent })).toEqual({ id: busy.id, interrupted: true, dropped: 1 })
    const events = (await h.persistence!.inspect(busy.id)).events
    expect(types(events)).toEqual(['subagent/descriptor', 'subagent/start', 'subagent/queued', 'subagent/end', 'subagent/end'])
    expect(events.at(-1)!.data).toEqual({ reason: 'closed', dropped: 1 })
    expect(await h.runtime.wait([busy.id], { caller: parent })).toEqual([{ id: busy.id, state: 'closed' }])
    expect(await codeOf(h.runtime.close(busy.id, { caller: parent }))).toBe('SUBAGENT_CLOSED')

    const idle = h.runtime.spawn(parent, { mode: 'continuable', label: 'idle', context: 'fresh' })
    await idle.done
    expect(h.sessions.get(idle.id)).toBeUndefined()
    expect(await h.runtime.close(idle.id, { caller: parent })).toEqual({ id: idle.id, interrupted: false, dropped: 0 })
    expect(h.sessions.get(idle.id)).toBeUndefined()
    expect((await h.persistence!.inspect(idle.id)).events.at(-1)).toMatchObject({ type: 'subagent/end', data: { reason: 'closed' } })
    const once = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh' })
    await once.done
    expect(await codeOf(h.runtime.close(once.id, { caller: parent }))).toBe('SUBAGENT_NOT_RESUMABLE')
  })

  it('wait returns final messages and diagnostics, and reports running children when the timeout passes', async () => {
    const hold = gate()
    const h = await host({
      driver: createScriptedDriver((run) =>
        run.identity?.label === 'slow' ? holdScript(hold.promise) : [{ kind: 'message', text: `${run.identity?.label} done` }],
      ),
    })
    const parent = h.sessions.create()
    const fast = h.runtime.spawn(parent, { mode: 'one-shot', label: 'fast', context: 'fresh' })
    const slow = h.runtime.spawn(parent, { mode: 'continuable', label: 'slow', context: 'fresh' })
    await h.runtime.send(slow.id, { caller: parent, text: 'later' })
    // The fast child settles first (waited for without a timeout); the slow one never settles while held, so the
    // timed wait ends by its timeout whatever the machine's speed.
    await h.runtime.wait([fast.id], { caller: parent })
    const timedOut = await h.runtime.wait([fast.id, slow.id, 'ghost'], { caller: parent, timeoutMs: 50 })
    expect(timedOut).toEqual([
      { id: fast.id, state: 'settled', reason: 'completed', text: 'fast done' },
      { id: slow.id, state: 'running', queued: 1 },
      { id: 'ghost', state: 'not-found' },
    ])
    hold.open()
    // Its first run and then the queued one (the gate is open now) both ran.
    expect(await h.runtime.wait([slow.id], { caller: parent })).toEqual([
      { id: slow.id, state: 'settled', reason: 'completed', text: 'finished' },
    ])
    expect(parent.events.filter((e) => e.type === 'subagent/notice').map((e) => (e.data as { label: string }).label)).toEqual([
      'fast',
      'slow',
      'slow',
    ])
    expect(await codeOf(h.runtime.wait([fast.id], { caller: parent, timeoutMs: -1 }))).toBe('SUBAGENT_INVALID_ARGUMENT')
    expect(await codeOf(h.runtime.wait([fast.id], { caller: parent, signal: AbortSignal.abort() }))).toBe('CANCELLED')
  })

  it('wait reads a settled child of another process from its log', async () => {
    const storage = new MemoryPersistenceStorage()
    const first = await createHost({ storage })
    const parent = first.sessions.create({ id: 'p' })
    await first.runtime.spawn(parent, { mode: 'one-shot', label: 'x', context: 'fresh', prompt: 'go', id: 'c' }).done
    await first.dispose()
    const h = await host({ storage })
    const live = h.sessions.restore(await h.persistence!.load('p' as never))
    expect(await h.runtime.wait(['c'], { caller: live })).toEqual([{ id: 'c', state: 'settled', reason: 'completed', text: 'Done: go' }])
  })
})

describe('report, notices and drain', () => {
  it("a child's report lands on its live parent as a notice the parent's next drive() receives", async () => {
    const seen: SubagentRun[] = []
    const reporter: SubagentTool = {
      name: 'report',
      description: 'report',
      jsonSchema: {},
      async execute(input, { agent }) {
        return h.runtime.report(agent, (input as { text: string }).text)
      },
    }
    const scripted = createScriptedDriver((run) =>
      run.identity === undefined
        ? [{ kind: 'message', text: 'parent turn' }]
        : [
            { kind: 'call', name: 'report', arguments: { text: 'halfway' } },
            { kind: 'message', text: 'child done' },
          ],
    )
    const h: Host = await host({
      driver: {
        name: 'd',
        run(run) {
          seen.push(run)
          return scripted.run(run)
        },
      },
      tools: () => [reporter],
    })
    const parent = h.sessions.create()
    await h.runtime.spawn(parent, { mode: 'one-shot', label: 'kid', context: 'fresh' }).done
    const turn = h.runtime.drive(parent, { prompt: 'what happened?' })
    await turn.done
    const parentRun = seen.find((run) => run.kind === 'drive')!
    expect(parentRun.notices).toEqual([
      { kind: 'report', child: expect.any(String), mode: 'one-shot', label: 'kid', text: 'halfway' },
      { kind: 'settled', child: expect.any(String), mode: 'one-shot', label: 'kid', reason: 'completed', text: 'child done' },
    ])
    // Notices are delivered once: the next turn starts with none.
    await h.runtime.drive(parent).done
    expect(seen.at(-1)!.notices).toEqual([])
    expect(await codeOf(() => h.runtime.report(parent, 'x'))).toBe('SUBAGENT_NOT_A_SUBAGENT')
  })

  it('report needs a live parent and a text', async () => {
    const h = await host({ persistence: false })
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'c', context: 'fresh' })
    await child.done
    expect(await codeOf(() => h.runtime.report(child.session, ''))).toBe('SUBAGENT_INVALID_ARGUMENT')
    await h.sessions.dispose(parent.id)
    expect(await codeOf(() => h.runtime.report(child.session, 'late'))).toBe('SUBAGENT_PARENT_NOT_LIVE')
  })

  it('release() drains running children with a stated reason before the parent goes cold; disposing a parent drains too', async () => {
    const hold = gate()
    const h = await host({ driver: createScriptedDriver(holdScript(hold.promise)) })
    const parent = h.sessions.create({ id: 'parent' })
    const a = h.runtime.spawn(parent, { mode: 'continuable', label: 'a', context: 'fresh' })
    await h.runtime.send(a.id, { caller: parent, text: 'queued for later' })
    await h.runtime.release(parent)
    expect((await a.done).end).toBe('drained')
    const stored = await h.persistence!.inspect('parent' as never)
    expect(stored.events.at(-1)).toMatchObject({ type: 'subagent/notice', data: { kind: 'settled', child: a.id, reason: 'drained' } })
    const child = await h.persistence!.inspect(a.id)
    expect(child.events.at(-1)).toMatchObject({ type: 'subagent/end', data: { reason: 'drained' } })
    // The queued message is still in the child's log, delivered by the next resume.
    expect(child.events.filter((e) => e.type === 'subagent/queued')).toHaveLength(1)

    const other = h.sessions.create({ id: 'other' })
    const b = h.runtime.spawn(other, { mode: 'one-shot', label: 'b', context: 'fresh' })
    await h.sessions.dispose(other.id)
    expect((await b.done).end).toBe('drained')
    expect(h.warnings).toEqual([])
  })

  it('a one-shot child going cold drains its own running children first (its one result is final; it is never woken)', async () => {
    const hold = gate()
    const h: Host = await host({
      driver: createScriptedDriver((run) => {
        if (run.identity?.label === 'grandchild') return holdScript(hold.promise)
        return [
          { kind: 'event', type: 'x/marker', data: null },
          { kind: 'message', text: 'spawned' },
        ]
      }),
    })
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'one-shot', label: 'child', context: 'fresh' })
    const grandchild = h.runtime.spawn(child.session, { mode: 'continuable', label: 'grandchild', context: 'fresh' }).id
    await child.done
    await h.runtime.wait([child.id], { caller: parent })
    expect((await h.persistence!.inspect(grandchild)).events.at(-1)).toMatchObject({
      type: 'subagent/end',
      data: { reason: 'drained' },
    })
    expect((await h.persistence!.inspect(child.id)).events.at(-1)).toMatchObject({
      type: 'subagent/notice',
      data: { child: grandchild, reason: 'drained' },
    })
  })
})

describe('descriptor capabilities honoured by the runtime', () => {
  it('validates a one-shot result against outputSchema: parsed output when valid, a typed error in the result when not', async () => {
    const schema = { type: 'object', properties: { verdict: { type: 'string', enum: ['pass', 'fail'] } }, required: ['verdict'] }
    const h = await host({ driver: createScriptedDriver((run) => [{ kind: 'message', text: run.prompt! }]) })
    const parent = h.sessions.create()
    const good = await h.runtime.spawn(parent, {
      mode: 'one-shot',
      context: 'fresh',
      prompt: '```json\n{"verdict":"pass"}\n```',
      settings: { outputSchema: schema },
    }).done
    expect(good).toMatchObject({ end: 'completed', output: { verdict: 'pass' } })
    const bad = await h.runtime.spawn(parent, {
      mode: 'one-shot',
      context: 'fresh',
      prompt: '{"verdict":"maybe"}',
      settings: { outputSchema: schema },
    }).done
    expect(bad.end).toBe('invalid-output')
    expect(isDshError(bad.error, 'SUBAGENT_INVALID_OUTPUT')).toBe(true)
    expect((bad.error as Error).message).toContain('verdict')
    const prose = await h.runtime.spawn(parent, {
      mode: 'one-shot',
      context: 'fresh',
      prompt: 'it passed',
      settings: { outputSchema: schema },
    }).done
    expect(prose.end).toBe('invalid-output')
    expect((prose.error as Error).message).toContain('not JSON')
    expect(parent.events.filter((e) => e.type === 'subagent/notice').map((e) => (e.data as { reason: string }).reason)).toEqual([
      'completed',
      'invalid-output',
      'invalid-output',
    ])
  })

  it('narrows the tools by toolFilter and hands persona and settings to the driver, on spawn and on a cold resume', async () => {
    const seen: SubagentRun[] = []
    const tool = (name: string): SubagentTool => ({ name, description: name, jsonSchema: {}, execute: async () => ({ text: name }) })
    const h = await host({
      driver: {
        name: 'd',
        async run(run) {
          seen.push(run)
          run.session.append('turn/start', { turn: run.turn })
          run.session.append('turn/end', { turn: run.turn, reason: 'completed' })
          return { reason: 'completed' }
        },
      },
      tools: () => [tool('read'), tool('grep'), tool('bash')],
    })
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, {
      mode: 'continuable',
      label: 'r',
      context: 'fresh',
      settings: { persona: 'terse reviewer', toolFilter: { allow: ['read', 'bash'], deny: ['bash'] }, agentModel: 'm1' },
    })
    await child.done
    await (await h.runtime.resume(child.id, { caller: parent })).done
    expect(seen.map((run) => run.tools.map((t) => t.name))).toEqual([['read'], ['read']])
    expect(seen.map((run) => run.settings?.persona)).toEqual(['terse reviewer', 'terse reviewer'])
    expect(seen[1]!.settings).toMatchObject({ agentModel: 'm1' })
    // A continuable child's composition is in its descriptor, as the harness writes it.
    expect(seen[1]!.descriptor).toMatchObject({ persona: 'terse reviewer', agentModel: 'm1', label: 'r' })
    expect(seen[1]!.kind).toBe('resume')
  })

  it('the scripted driver calls real tools and logs each call with exactly one result (errors included)', async () => {
    const failing: SubagentTool = {
      name: 'boom',
      description: '',
      jsonSchema: {},
      execute: async () => {
        throw Object.assign(new Error('no luck'), { code: 'X_FAILED' })
      },
    }
    const echo: SubagentTool = {
      name: 'echo',
      description: '',
      jsonSchema: {},
      execute: async (input) => ({ text: JSON.stringify(input) }),
    }
    const h = await host({
      driver: createScriptedDriver([
        { kind: 'call', name: 'echo', arguments: { a: 1 } },
        { kind: 'call', name: 'echo', arguments: (previous) => ({ saw: previous.length }) },
        { kind: 'call', name: 'boom' },
        { kind: 'call', name: 'missing' },
      ]),
      tools: () => [echo, failing],
    })
    const parent: Session = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh' })
    await child.done
    const results = (await h.persistence!.inspect(child.id)).events.filter((e) => e.type === 'tool/result').map((e) => e.data)
    expect(results).toEqual([
      { turn: 1, callId: 'call-1-1', content: { text: '{"a":1}' } },
      { turn: 1, callId: 'call-1-2', content: { text: '{"saw":1}' } },
      { turn: 1, callId: 'call-1-3', content: { code: 'TOOL_FAILED', message: 'no luck' }, isError: true },
      {
        turn: 1,
        callId: 'call-1-4',
        content: { code: 'TOOL_UNKNOWN', message: 'No tool named "missing" is available to this agent.' },
        isError: true,
      },
    ])
  })
})

describe('input that arrives while a child is going cold', () => {
  it('waits for the child to settle, then resumes it cold with the message (nothing appended to a closed session)', async () => {
    const real = createMemoryPersistence({ storage: new MemoryPersistenceStorage() })
    const stall = gate()
    let stalled: (() => void) | undefined
    // A persistence that holds the batch carrying the run's end: the child is frozen inside its final flush.
    const persistence = new Proxy(real, {
      get(target, key, receiver) {
        if (key === 'append') {
          return async (...args: Parameters<typeof real.append>) => {
            if (args[1].some((event) => event.type === 'subagent/end')) {
              stalled?.()
              await stall.promise
            }
            return target.append(...args)
          }
        }
        const value = Reflect.get(target, key, receiver)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const h = await host({ persistence })
    const parent = h.sessions.create()
    const reachedFlush = new Promise<void>((resolve) => (stalled = resolve))
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'c', context: 'fresh', prompt: 'one' })
    await reachedFlush
    expect(h.runtime.isRunning(child.id)).toBe(true)
    const sending = h.runtime.send(child.id, { caller: parent, text: 'two' })
    stall.open()
    const sent = await sending
    expect(sent.status).toBe('started')
    if (sent.status === 'started') expect((await sent.handle.done).text).toBe('Done: two')
    expect(h.errors).toEqual([])
    const events = (await h.persistence!.inspect(child.id)).events
    expect(events.filter((e) => e.type === 'subagent/start').map((e) => (e.data as { kind: string }).kind)).toEqual(['spawn', 'resume'])
  })
})

describe('messages racing to one cold child', () => {
  it('starts it once and queues the others behind, in the order they were sent', async () => {
    const { driver, runs, hold } = gatedDriver()
    const h = await host({ driver })
    const parent = h.sessions.create({ id: 'parent' })
    await h.runtime.spawn(parent, { mode: 'continuable', label: 'w', context: 'fresh', prompt: 'first', id: 'w' }).done
    const release = hold('a')
    const results = await Promise.all(['a', 'b', 'c'].map((text) => h.runtime.send('w', { caller: parent, text })))
    expect(results.map((r) => r.status)).toEqual(['started', 'queued', 'queued'])
    release()
    await h.runtime.wait(['w'], { caller: parent })
    expect(runs.map((r) => r.prompt)).toEqual(['first', 'a', 'b', 'c'])
  })
})

describe('drive: a turn of a top-level session', () => {
  it('refuses a session that is mid-turn or not live, and a disposed runtime', async () => {
    const hold = gate()
    const h = await createHost({ driver: createScriptedDriver(holdScript(hold.promise)) })
    const top = h.sessions.create()
    const turn = h.runtime.drive(top, { prompt: 'go' })
    expect(h.runtime.isRunning(top.id)).toBe(true)
    expect(await codeOf(() => h.runtime.drive(top))).toBe('SUBAGENT_BUSY')
    expect(await codeOf(() => h.runtime.drive('nobody'))).toBe('SUBAGENT_NOT_FOUND')
    hold.open()
    expect(await turn.done).toMatchObject({ reason: 'completed', text: 'finished', end: 'completed' })
    // No lifecycle events on a top-level session: they belong to children.
    expect(types(top.events)).toEqual([])
    const runtime = h.runtime
    await h.dispose()
    expect(await codeOf(() => runtime.drive(top))).toBe('SUBAGENT_DISPOSED')
  })
})
