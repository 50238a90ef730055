import type { Session, SessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver, type ScriptStep, type SubagentRun, type SubagentStepPricer } from '../src/index.js'
import { codeOf, gate, type Host, hostsPerTest } from './helpers.js'

const { open: host } = hostsPerTest()

/**
 * A price list of one model: an input token costs 1e-6 USD, an output token
 * 2e-6. (The runtime sits below `@dsh/session-stats`, so its tests price by
 * hand; the host's pricing over a real price table is tested there.)
 */
const pricing: SubagentStepPricer = ({ provider, model, tokens }) =>
  provider === 'fake' && model === 'm-1' ? { usd: (tokens.input + 2 * tokens.output) / 1_000_000 } : { usd: null, reason: 'unknown-model' }
const model = { provider: 'fake', model: 'm-1' }

/** `n` model calls of `input` + `output` tokens each, then an answer. */
function steps(n: number, input: number, output = 0): ScriptStep[] {
  return [...Array.from({ length: n }, (): ScriptStep => ({ kind: 'step', usage: { input, output } })), { kind: 'message', text: 'done' }]
}

/** A driver whose script is chosen by the child's label, with the priced model `fake`/`m-1` as its default. */
function byLabel(scripts: Record<string, ScriptStep[]>) {
  return createScriptedDriver((run: SubagentRun) => scripts[run.identity?.label ?? ''] ?? [{ kind: 'message', text: 'ok' }], { model })
}

/** The `step/end` events of a session that reported usage (completed model calls). */
function countedSteps(session: Session): SessionEvent[] {
  return session.events.filter((event) => event.type === 'step/end' && (event.data as { usage?: unknown }).usage !== undefined)
}

function lastEnd(session: Session): Record<string, unknown> {
  return session.events.filter((event) => event.type === 'subagent/end').at(-1)!.data as Record<string, unknown>
}

/**
 * How many steps of `perStep` tokens run under `limit`: up to the first whose
 * sum reaches the limit. Above it, that step's end stops the child; exactly
 * at it, the next step is stopped as it starts and spends nothing.
 */
function firstCrossing(perStep: number, limit: number): number {
  return Math.ceil(limit / perStep)
}

describe('token budget', () => {
  it.each([
    [40, 100],
    [25, 100],
    [1, 7],
    [99, 100],
    [101, 100],
  ])('steps of %i tokens under maxTokens %i: the child ends budget at the first step that crosses it', async (perStep, limit) => {
    const h = await host({ driver: byLabel({ worker: steps(20, perStep) }) })
    const parent = h.sessions.create()
    const handle = h.runtime.spawn(parent, {
      mode: 'one-shot',
      label: 'worker',
      context: 'fresh',
      prompt: 'go',
      settings: { maxTokens: limit },
    })
    expect(handle.budget).toEqual({ maxTokens: limit })
    const settled = await handle.done
    const crossing = firstCrossing(perStep, limit)
    expect(countedSteps(handle.session)).toHaveLength(crossing)
    const exceeded = { kind: 'tokens', session: handle.id, limit, spent: crossing * perStep }
    expect(settled).toMatchObject({ end: 'budget', exceeded })
    expect((settled.error as { code?: string }).code).toBe('SUBAGENT_BUDGET_EXCEEDED')
    expect(lastEnd(handle.session)).toMatchObject({
      reason: 'budget',
      exceeded,
      spent: { tokens: crossing * perStep, turns: 1 },
      error: expect.stringContaining('SUBAGENT_BUDGET_EXCEEDED'),
    })
    // The parent is told, with the figures.
    expect(parent.events.at(-1)).toMatchObject({ type: 'subagent/notice', data: { kind: 'settled', reason: 'budget', exceeded } })
    // The budget is recorded in the options event, never in the descriptor.
    expect(handle.session.events.find((event) => event.type === 'subagent/options')!.data).toMatchObject({ maxTokens: limit })
    expect(handle.session.events[0]!.data).not.toHaveProperty('maxTokens')
  })

  it('a child within its budget completes and records what it spent', async () => {
    const h = await host({ driver: byLabel({ worker: steps(3, 10, 5) }) })
    const parent = h.sessions.create()
    const handle = h.runtime.spawn(parent, { mode: 'one-shot', label: 'worker', context: 'fresh', settings: { maxTokens: 45 } })
    const settled = await handle.done
    expect(settled.end).toBe('completed')
    expect(lastEnd(handle.session)).toMatchObject({ reason: 'completed', spent: { tokens: 45, turns: 1, costUsd: null } })
  })

  it('spending exactly the limit leaves nothing: the next model call is stopped as it starts', async () => {
    const h = await host({ driver: byLabel({ worker: steps(5, 50) }) })
    const parent = h.sessions.create()
    const handle = h.runtime.spawn(parent, { mode: 'one-shot', label: 'worker', context: 'fresh', settings: { maxTokens: 100 } })
    const settled = await handle.done
    expect(settled).toMatchObject({ end: 'budget', exceeded: { kind: 'tokens', limit: 100, spent: 100 } })
    expect(countedSteps(handle.session)).toHaveLength(2)
    expect(handle.session.events.filter((e) => e.type === 'step/end').at(-1)!.data).toEqual({ finish: 'aborted' })
  })
})

describe('cost budget', () => {
  it('prices each step with the price table and ends the child at the first step that crosses it', async () => {
    const h = await host({ pricing, driver: byLabel({ worker: steps(10, 30, 10) }) })
    const parent = h.sessions.create()
    // Each step costs 30e-6 + 20e-6 = 5e-5 USD: the third takes the sum to 1.5e-4, past 1.2e-4.
    const handle = h.runtime.spawn(parent, { mode: 'one-shot', label: 'worker', context: 'fresh', settings: { maxCostUsd: 0.00012 } })
    const settled = await handle.done
    expect(countedSteps(handle.session)).toHaveLength(3)
    expect(settled.end).toBe('budget')
    expect(settled.exceeded).toMatchObject({ kind: 'cost', session: handle.id, limit: 0.00012 })
    expect(settled.exceeded!.spent).toBeCloseTo(0.00015, 12)
    expect(settled.exceeded).not.toHaveProperty('unpriced')
  })

  it('fails closed at spawn: a model missing from the price table, or no table at all, is refused before the child exists', async () => {
    const h = await host({ pricing, driver: byLabel({}) })
    const parent = h.sessions.create()
    const before = h.sessions.list().length
    const spawn = (settings: Record<string, unknown>) => () =>
      h.runtime.spawn(parent, { mode: 'one-shot', label: 'x', context: 'fresh', settings: settings as never })
    expect(await codeOf(spawn({ maxCostUsd: 1, model: 'not-in-the-table' }))).toBe('SUBAGENT_BUDGET_UNPRICED')
    expect(h.sessions.list()).toHaveLength(before)
    // The table prices 'm-1' (the driver's model): that spawn is accepted.
    expect(await codeOf(spawn({ maxCostUsd: 1 }))).toBe('resolved')

    const bare = await host({ driver: byLabel({}) })
    const top = bare.sessions.create()
    expect(await codeOf(() => bare.runtime.spawn(top, { mode: 'one-shot', context: 'fresh', settings: { maxCostUsd: 1 } }))).toBe(
      'SUBAGENT_BUDGET_UNPRICED',
    )
    expect(bare.sessions.list()).toHaveLength(1)
  })

  it('fails closed at a step: a step on a model the table does not price ends the child budget, unpriced', async () => {
    const script: ScriptStep[] = [
      { kind: 'step', usage: { input: 10, output: 0 } },
      { kind: 'step', usage: { input: 10, output: 0 }, model: 'surprise' },
      { kind: 'step', usage: { input: 10, output: 0 } },
      { kind: 'message', text: 'done' },
    ]
    const h = await host({ pricing, driver: byLabel({ worker: script }) })
    const parent = h.sessions.create()
    const handle = h.runtime.spawn(parent, { mode: 'one-shot', label: 'worker', context: 'fresh', settings: { maxCostUsd: 5 } })
    const settled = await handle.done
    expect(countedSteps(handle.session)).toHaveLength(2)
    expect(settled).toMatchObject({ end: 'budget', exceeded: { kind: 'cost', limit: 5, unpriced: 'unknown-model' } })
    expect(lastEnd(handle.session)).toMatchObject({ spent: { costUsd: null, tokens: 20 } })
  })
})

describe('wall-time budget', () => {
  it('counts on the injected clock: the first event at or past the deadline stops the child', async () => {
    let now = 5_000
    const h = await host({ clock: () => now, driver: byLabel({ worker: steps(10, 1) }) })
    // Each model call takes 400 ms of the test's clock (advanced after the runtime has looked at the event).
    h.ctx.on('session/event', (_session, event) => {
      if (event.type === 'step/end') now += 400
    })
    const parent = h.sessions.create()
    const handle = h.runtime.spawn(parent, { mode: 'one-shot', label: 'worker', context: 'fresh', settings: { maxWallMs: 1_000 } })
    const settled = await handle.done
    // Steps end at 5000, 5400, 5800; the fourth starts at 6200, past the deadline of 6000, and is stopped there.
    expect(countedSteps(handle.session)).toHaveLength(3)
    expect(settled).toMatchObject({ end: 'budget', exceeded: { kind: 'wall', session: handle.id, limit: 1_000, spent: 1_200 } })
  })
})

describe('wall-time budget of a run that writes nothing', () => {
  it('the backstop timer stops a child whose turn hangs once the clock is past its deadline', async () => {
    let now = 0
    const never = new Promise<void>(() => {})
    const h = await host({ clock: () => now, driver: byLabel({ worker: [{ kind: 'until', promise: never }] }) })
    const parent = h.sessions.create()
    const handle = h.runtime.spawn(parent, { mode: 'one-shot', label: 'worker', context: 'fresh', settings: { maxWallMs: 1 } })
    now = 7
    const settled = await handle.done
    expect(settled).toMatchObject({ end: 'budget', exceeded: { kind: 'wall', limit: 1, spent: 7 } })
    expect(countedSteps(handle.session)).toHaveLength(0)
  })
})

describe('turn budget (the maxTurns setting, enforced)', () => {
  it('a continuable child runs maxTurns turns; a resume or send after them is refused before anything is written, after a cold resume too', async () => {
    let driverRuns = 0
    const driver = createScriptedDriver((run) => {
      driverRuns++
      return [
        { kind: 'step', usage: { input: 1, output: 1 } },
        { kind: 'message', text: `turn ${run.turn}` },
      ]
    })
    const h = await host({ driver })
    const parent = h.sessions.create()
    const first = h.runtime.spawn(parent, {
      mode: 'continuable',
      label: 'helper',
      context: 'fresh',
      prompt: 'a',
      settings: { maxTurns: 2 },
    })
    expect((await first.done).end).toBe('completed')
    expect(h.sessions.get(first.id)).toBeUndefined() // cold: its counter is rebuilt from its log
    const second = await h.runtime.resume(first.id, { caller: parent, prompt: 'b' })
    expect(await second.done).toMatchObject({ end: 'completed' })
    const observe = async () => (await h.ctx.require('sessionQuery').observeSession(first.id)).events
    const before = await observe()
    const exceeded = { kind: 'turns', session: first.id, limit: 2, spent: 2 }
    const resumed = await h.runtime.resume(first.id, { caller: parent, prompt: 'c' }).catch((error: unknown) => error)
    expect(resumed).toMatchObject({ code: 'SUBAGENT_BUDGET_EXCEEDED', details: exceeded })
    expect((resumed as Error).message).toBe(
      `Subagent '${first.id}' cannot take another turn: its turns budget (2 turns) is used up (2 turns spent). Nothing was sent; start a new subagent or finish with what you have.`,
    )
    const sent = await h.runtime.send(first.id, { caller: parent, text: 'c' }).catch((error: unknown) => error)
    expect(sent).toMatchObject({ code: 'SUBAGENT_BUDGET_EXCEEDED', details: exceeded })
    expect(driverRuns).toBe(2)
    // Nothing reached the child: no start, no message, no end; it stays cold.
    expect(await observe()).toEqual(before)
    expect(h.sessions.get(first.id)).toBeUndefined()
    expect(before.filter((event) => event.type === 'subagent/end').at(-1)!.data).toMatchObject({
      reason: 'completed',
      spent: { turns: 2, tokens: 4 },
    })
  })

  it('a busy child on its last turn is refused rather than queued, and so is a live idle one with no turn left', async () => {
    const hold = gate()
    const driver = createScriptedDriver((run) =>
      run.turn === 1
        ? [{ kind: 'message', text: 'one' }]
        : [
            { kind: 'until', promise: hold.promise },
            { kind: 'message', text: 'two' },
          ],
    )
    const h = await host({ driver, persistence: false })
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, {
      mode: 'continuable',
      label: 'helper',
      context: 'fresh',
      prompt: 'a',
      settings: { maxTurns: 2 },
    })
    await child.done
    expect(h.sessions.get(child.id)).toBe(child.session) // live: its ledger is the runtime's own
    const second = await h.runtime.send(child.id, { caller: parent, text: 'b' })
    expect(second.status).toBe('started')
    // Its second and last turn is running: a message queued now could never run.
    const count = child.session.events.length
    expect(await codeOf(() => h.runtime.send(child.id, { caller: parent, text: 'c' }))).toBe('SUBAGENT_BUDGET_EXCEEDED')
    expect(child.session.events).toHaveLength(count)
    hold.open()
    if (second.status === 'started') expect(await second.handle.done).toMatchObject({ end: 'completed' })
    const settled = child.session.events.length
    expect(await codeOf(() => h.runtime.send(child.id, { caller: parent, text: 'c' }))).toBe('SUBAGENT_BUDGET_EXCEEDED')
    expect(await codeOf(() => h.runtime.resume(child.id, { caller: parent, prompt: 'c' }))).toBe('SUBAGENT_BUDGET_EXCEEDED')
    expect(child.session.events).toHaveLength(settled)
  })
})

describe('budgets down the tree', () => {
  /** A child P of a top-level session with `budget`; returns once P has run `steps` model calls (its script then holds its turn open). */
  async function budgetedParent(h: Host, budget: Record<string, number>, steps: number) {
    const top = h.sessions.create()
    const p = h.runtime.spawn(top, { mode: 'one-shot', label: 'P', context: 'fresh', settings: budget as never })
    while (countedSteps(p.session).length < steps) await new Promise((resolve) => setImmediate(resolve))
    return { top, p }
  }

  it("clamps a child's request to its parent's remainder and records the clamped figure", async () => {
    const hold = gate()
    const h = await host({
      driver: byLabel({
        P: [
          { kind: 'step', usage: { input: 30, output: 0 } },
          { kind: 'until', promise: hold.promise },
          { kind: 'message', text: 'p' },
        ],
        C: steps(1, 5),
      }),
    })
    const { p } = await budgetedParent(h, { maxTokens: 100, maxTurns: 5 }, 1)
    const c = h.runtime.spawn(p.session, { mode: 'one-shot', label: 'C', context: 'fresh', settings: { maxTokens: 500, maxTurns: 2 } })
    // 100 - 30 = 70 tokens left; turns: P runs its one turn, so 4 are left and 2 is within them.
    expect(c.budget).toEqual({ maxTokens: 70, maxTurns: 2 })
    expect(c.session.events.find((event) => event.type === 'subagent/options')!.data).toMatchObject({ maxTokens: 70, maxTurns: 2 })
    expect((await c.done).end).toBe('completed')
    // C's step was charged to P as well: one shared counter per tree.
    hold.open()
    await p.done
    expect(lastEnd(p.session)).toMatchObject({ reason: 'completed', spent: { tokens: 35, turns: 2 } })
  })

  it("clamps a wall budget to the parent's deadline in whole milliseconds; less than one left refuses the spawn", async () => {
    let now = 0
    const hold = gate()
    const h = await host({
      clock: () => now,
      driver: byLabel({
        P: [
          { kind: 'until', promise: hold.promise },
          { kind: 'message', text: 'p' },
        ],
        C: steps(1, 1),
      }),
    })
    const { p } = await budgetedParent(h, { maxWallMs: 1_000 }, 0)
    now = 400.5
    const c = h.runtime.spawn(p.session, { mode: 'one-shot', label: 'C', context: 'fresh', settings: { maxWallMs: 5_000 } })
    expect(c.budget).toEqual({ maxWallMs: 599 })
    await c.done
    now = 999.5
    expect(await codeOf(() => h.runtime.spawn(p.session, { mode: 'one-shot', context: 'fresh' }))).toBe('SUBAGENT_BUDGET_EXHAUSTED')
    hold.open()
    await p.done
  })

  it('refuses a spawn under a budget with nothing left, and one whose inherited cost budget cannot be priced', async () => {
    const hold = gate()
    const h = await host({
      pricing,
      driver: byLabel({
        P: [
          { kind: 'step', usage: { input: 10, output: 0 } },
          { kind: 'until', promise: hold.promise },
          { kind: 'message', text: 'p' },
        ],
      }),
    })
    const { p } = await budgetedParent(h, { maxTokens: 10, maxCostUsd: 1 }, 1)
    expect(await codeOf(() => h.runtime.spawn(p.session, { mode: 'one-shot', context: 'fresh' }))).toBe('SUBAGENT_BUDGET_EXHAUSTED')
    hold.open()
    await p.done

    const hold2 = gate()
    const h2 = await host({
      pricing,
      driver: byLabel({
        P: [
          { kind: 'until', promise: hold2.promise },
          { kind: 'message', text: 'p' },
        ],
      }),
    })
    const { p: p2 } = await budgetedParent(h2, { maxCostUsd: 1 }, 0)
    // No cost budget of its own, but it spends P's: its model must be priced too.
    expect(await codeOf(() => h2.runtime.spawn(p2.session, { mode: 'one-shot', context: 'fresh', settings: { model: 'elsewhere' } }))).toBe(
      'SUBAGENT_BUDGET_UNPRICED',
    )
    hold2.open()
    await p2.done
  })

  it('two concurrent children sharing their parent budget stop together at the first step that crosses it', async () => {
    const hold = gate()
    const h = await host({
      driver: byLabel({
        P: [
          { kind: 'until', promise: hold.promise },
          { kind: 'message', text: 'p' },
        ],
        A: steps(10, 30),
        B: steps(10, 30),
      }),
    })
    const { p } = await budgetedParent(h, { maxTokens: 100 }, 0)
    const a = h.runtime.spawn(p.session, { mode: 'one-shot', label: 'A', context: 'fresh' })
    const b = h.runtime.spawn(p.session, { mode: 'one-shot', label: 'B', context: 'fresh' })
    expect(a.budget).toBeUndefined() // no budget of their own: they spend P's
    const [sa, sb, sp] = await Promise.all([a.done, b.done, p.done])
    // 30 tokens a step: the fourth step of the two together takes P's sum to 120, past 100.
    const counted = countedSteps(a.session).length + countedSteps(b.session).length
    expect(counted).toBe(firstCrossing(30, 100))
    const exceeded = { kind: 'tokens', session: p.id, limit: 100, spent: 120 }
    expect(sa).toMatchObject({ end: 'budget', exceeded })
    expect(sb).toMatchObject({ end: 'budget', exceeded })
    // P's own run is stopped too: its budget is used up.
    expect(sp).toMatchObject({ end: 'budget', exceeded })
    expect(lastEnd(p.session)).toMatchObject({ spent: { tokens: 120 } })
    // P heard of both, with the figures.
    const notices = p.session.events.filter((event) => event.type === 'subagent/notice').map((event) => event.data)
    expect(notices).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ child: a.id, reason: 'budget', exceeded }),
        expect.objectContaining({ child: b.id, reason: 'budget', exceeded }),
      ]),
    )
  })
})

describe('after a budget stop', () => {
  it('wait reports the stop with its figures, and input queued behind the stopped run stays logged and undelivered', async () => {
    const hold = gate()
    const h = await host({
      driver: byLabel({
        worker: [{ kind: 'until', promise: hold.promise }, ...steps(10, 40)],
      }),
    })
    const parent = h.sessions.create()
    const handle = h.runtime.spawn(parent, { mode: 'continuable', label: 'worker', context: 'fresh', settings: { maxTokens: 100 } })
    expect(await h.runtime.send(handle.id, { caller: parent, text: 'and then this' })).toEqual({ status: 'queued', position: 1 })
    hold.open()
    expect(await handle.done).toMatchObject({ end: 'budget' })
    const [entry] = await h.runtime.wait([handle.id], { caller: parent })
    expect(entry).toMatchObject({ state: 'settled', reason: 'budget', exceeded: { kind: 'tokens', limit: 100, spent: 120 } })
    // The queued message did not start a run that would be stopped at once: it waits in the log.
    const log = (await h.ctx.require('sessionQuery').observeSession(handle.id)).events
    expect(log.filter((event) => event.type === 'subagent/start')).toHaveLength(1)
    expect(log.filter((event) => event.type === 'subagent/queued').map((event) => event.data)).toEqual([
      { from: parent.id, text: 'and then this' },
    ])
    // Sent again, it is refused before anything is written: nothing is left for a run to read it.
    const refused = await h.runtime.send(handle.id, { caller: parent, text: 'more' }).catch((error: unknown) => error)
    expect(refused).toMatchObject({
      code: 'SUBAGENT_BUDGET_EXCEEDED',
      details: { kind: 'tokens', session: handle.id, limit: 100, spent: 120 },
    })
    expect((refused as Error).message).toContain('tokens budget (100 tokens) is used up (120 tokens spent)')
    expect((await h.ctx.require('sessionQuery').observeSession(handle.id)).events).toHaveLength(log.length)
  })
})

describe('enforceability', () => {
  it('a runtime that cannot see appends refuses a budgeted spawn', async () => {
    const { SubagentRuntime } = await import('../src/index.js')
    const h = await host()
    const bare = new SubagentRuntime({ get: (name) => h.ctx.get(name) }, { driver: createScriptedDriver() })
    const top = h.sessions.create()
    expect(await codeOf(() => bare.spawn(top, { mode: 'one-shot', context: 'fresh', settings: { maxTokens: 5 } }))).toBe(
      'SUBAGENT_BUDGET_UNENFORCEABLE',
    )
    // Without a budget it spawns as ever.
    await bare.spawn(top, { mode: 'one-shot', context: 'fresh' }).done
    await bare.dispose()
  })
})
