import { type Context, isDshError } from '@dsh/context'
import type { Session, SessionId, StoredSessionEvent } from '@dsh/session'
import {
  createScriptedDriver,
  type ScriptStep,
  type SubagentDriver,
  type SubagentNotice,
  type SubagentRun,
  type SubagentRuntime,
  subagentsPlugin,
} from '@dsh/subagent'
import { afterEach, describe, expect, it } from 'vitest'
import {
  HARNESS_CONTROL_TOOL_NAMES,
  harnessNotices,
  harnessNoticeText,
  type SubagentControlTool,
  subagentControlTools,
  waitForChildSettlement,
} from '../src/index.js'
import { codeOf, gate, storeContext } from './support.js'

let ctx: Context | undefined
afterEach(async () => {
  await ctx?.dispose()
  ctx = undefined
})

/**
 * A real host (store, projections, memory persistence and query, subagents
 * offering the harness-dialect tools). Children behave by label: `held…`
 * hold their first turn until `held.open()`; a top-level turn prompted `plan`
 * starts a background `held reviewer`; `stubborn` holds its first turn and,
 * once interrupted, still takes until `release.open()` to stop (so a caller
 * waiting for the stop would still be waiting); `broken` writes a partial
 * answer and fails; `reporter` reports before answering; `spawner` starts a
 * background `held grandkid` and answers, and once woken names the
 * settlements it got; any other answers `done: <prompt>`.
 */
async function host(options: { provider?: string } = {}) {
  const c = await storeContext()
  ctx = c
  const held = gate()
  const release = gate()
  const runs: SubagentRun[] = []
  const script = (run: SubagentRun): ScriptStep[] => {
    const label = run.identity?.label
    if (run.kind === 'drive' && run.prompt === 'plan')
      return [
        { kind: 'call', name: 'subagent', arguments: { description: 'held reviewer', prompt: 'review the diff' } },
        { kind: 'message', text: 'started it' },
      ]
    if (label?.startsWith('held') === true && run.kind === 'spawn')
      return [
        { kind: 'until', promise: held.promise },
        { kind: 'message', text: 'held done' },
      ]
    if (label === 'broken')
      return [
        { kind: 'message', text: 'half of it' },
        { kind: 'fail', message: 'the model went away' },
      ]
    if (label === 'spawner' && run.kind === 'spawn')
      return [
        { kind: 'call', name: 'subagent', arguments: { description: 'held grandkid', prompt: 'dig' } },
        { kind: 'message', text: 'spawned it' },
      ]
    if (label === 'spawner')
      return [{ kind: 'message', text: `got: ${run.notices.map((n) => (n.kind === 'settled' ? n.text : n.kind)).join(', ')}` }]
    if (label === 'reporter')
      return [
        { kind: 'call', name: 'report', arguments: { output: 'found the flaky test' } },
        { kind: 'message', text: 'reported' },
      ]
    return [{ kind: 'message', text: `done: ${run.prompt ?? '(nothing new)'}` }]
  }
  const scripted = createScriptedDriver(script)
  const driver: SubagentDriver = {
    name: 'scripted',
    async run(run) {
      runs.push(run)
      if (run.identity?.label !== 'stubborn' || run.kind !== 'spawn') return scripted.run(run)
      run.session.append('turn/start', { turn: run.turn })
      await new Promise<void>((resolve) => run.signal.addEventListener('abort', () => resolve(), { once: true }))
      await release.promise
      run.session.append('turn/end', { turn: run.turn, reason: 'cancelled' })
      return { reason: 'cancelled' }
    },
  }
  const tools = (_agent: Session, runtime: SubagentRuntime) => subagentControlTools(runtime, { dialect: 'harness', ...options })
  await c.activate(subagentsPlugin({ driver, tools }))
  const runtime = c.require('subagents')
  const sessions = c.require('sessions')
  const harness = subagentControlTools(runtime, { dialect: 'harness', ...options })
  const tool = (name: string): SubagentControlTool => harness.find((t) => t.name === name)!
  return {
    c,
    runtime,
    runs,
    held,
    release,
    tool,
    parent: sessions.create({ id: 'parent' }),
    stranger: sessions.create({ id: 'stranger' }),
    call: async (name: string, input: unknown, agent: Session) =>
      (await tool(name).execute(input, { agent })) as unknown as Record<string, unknown>,
  }
}

function noticesOf(session: Session): SubagentNotice[] {
  return session.events.filter((e: StoredSessionEvent) => e.type === 'subagent/notice').map((e) => e.data as SubagentNotice)
}

async function ownEvents(c: Context, id: string): Promise<StoredSessionEvent[]> {
  const observed = await c.require('sessionQuery').observeSession(id)
  return observed.events.slice(observed.inheritedEventCount)
}

describe('the harness dialect', () => {
  it('offers subagent, send_message, interrupt_agent, report and list_agents, in the harness shapes; no wait_agents or close_agent', async () => {
    const { runtime } = await host()
    const tools = subagentControlTools(runtime, { dialect: 'harness' })
    expect(tools.map((t) => t.name)).toEqual([...HARNESS_CONTROL_TOOL_NAMES])
    expect(HARNESS_CONTROL_TOOL_NAMES).toEqual(['subagent', 'send_message', 'interrupt_agent', 'report', 'list_agents'])
    const shapes = Object.fromEntries(
      tools.map((t) => {
        const schema = t.jsonSchema as { properties: Record<string, { type: string }>; required?: string[]; additionalProperties: boolean }
        return [
          t.name,
          {
            properties: Object.fromEntries(Object.entries(schema.properties).map(([key, value]) => [key, value.type])),
            required: schema.required ?? [],
            strict: schema.additionalProperties === false,
          },
        ]
      }),
    )
    expect(shapes).toEqual({
      subagent: {
        properties: { description: 'string', prompt: 'string', run_in_background: 'boolean' },
        required: ['description', 'prompt'],
        strict: true,
      },
      send_message: { properties: { subagent_id: 'string', message: 'string' }, required: ['subagent_id', 'message'], strict: true },
      interrupt_agent: { properties: { agent_id: 'string' }, required: ['agent_id'], strict: true },
      report: { properties: { output: 'string' }, required: ['output'], strict: true },
      list_agents: { properties: { scope: 'string' }, required: [], strict: true },
    })
    for (const t of tools) expect(t.description.length).toBeGreaterThan(100)
    // The dsh dialect stays the default, and a filter applies within the dialect.
    expect(subagentControlTools(runtime).map((t) => t.name)).toContain('wait_agents')
    expect(subagentControlTools(runtime, { dialect: 'harness', filter: (name) => name !== 'report' }).map((t) => t.name)).toEqual([
      'subagent',
      'send_message',
      'interrupt_agent',
      'list_agents',
    ])
  })

  it('refuses an unknown dialect, list format or an empty provider with TOOL_SUBAGENT_CONTROL_INVALID_OPTIONS', async () => {
    const { runtime } = await host()
    for (const options of [{ dialect: 'claude' }, { listAgentsFormat: 'tree' }, { provider: '' }]) {
      expect(() => subagentControlTools(runtime, options as never)).toThrow(
        expect.objectContaining({ code: 'TOOL_SUBAGENT_CONTROL_INVALID_OPTIONS' }),
      )
    }
  })

  it('answers input in the wrong shape (a dsh-dialect argument, a missing field, an extra key) with a typed error naming the expected shape', async () => {
    const { tool, parent } = await host()
    const cases: [string, unknown, string][] = [
      ['subagent', { prompt: 'x', label: 'l' }, '{ "description": string, "prompt": string, "run_in_background"?: boolean }'],
      ['subagent', { description: 'd', prompt: 'x', run_in_background: 'yes' }, 'run_in_background'],
      ['send_message', { id: 'c', message: 'm' }, '{ "subagent_id": string, "message": string }'],
      ['interrupt_agent', { id: 'c' }, '{ "agent_id": string }'],
      ['report', { message: 'x' }, '{ "output": string }'],
      ['report', { output: '' }, 'output'],
    ]
    for (const [name, input, fragment] of cases) {
      const error = await tool(name)
        .execute(input, { agent: parent })
        .catch((e: unknown) => e)
      expect(isDshError(error, 'TOOL_SUBAGENT_CONTROL_INVALID_INPUT'), `${name} ${JSON.stringify(input)}`).toBe(true)
      expect((error as Error).message).toContain(fragment)
    }
    expect(await codeOf(tool('subagent').execute({ description: 'd', prompt: 'p' }, { agent: { id: '' } }))).toBe(
      'TOOL_SUBAGENT_CONTROL_INVALID_CONTEXT',
    )
  })
})

describe('subagent (harness)', () => {
  it('in the background (the default): a fresh continuable child labelled by its description, its id back at once', async () => {
    const { c, runtime, call, parent, held } = await host()
    parent.append('user/message', { text: 'something the child must not see' })
    const started = await call('subagent', { description: 'find flaky test', prompt: 'look in tests/' }, parent)
    const id = started.subagentId as string
    expect(started).toEqual({ text: `started subagent ${id}`, kind: 'continuable', subagentId: id })
    expect(runtime.isRunning(id)).toBe(true)
    held.open()
    await waitForChildSettlement(runtime, parent)
    const own = await ownEvents(c, id)
    expect(own[0]).toMatchObject({
      type: 'subagent/descriptor',
      data: { version: 2, mode: 'continuable', provider: 'scripted', label: 'find flaky test' },
    })
    // Fresh context: the child's log holds its own prompt, not the parent's conversation.
    expect(own.filter((e) => e.type === 'user/message').map((e) => e.data)).toEqual([{ text: 'look in tests/' }])
    expect((await c.require('sessionPersistence').inspect(id as never)).header).toMatchObject({ parentSession: 'parent', isSeeded: false })
    expect(await call('list_agents', {}, parent)).toMatchObject({ text: `${id} [ready] — find flaky test` })
  })

  it('writes the configured provider into the descriptor', async () => {
    const { c, call, parent, runtime } = await host({ provider: 'spawn' })
    const started = await call('subagent', { description: 'count', prompt: 'count' }, parent)
    await waitForChildSettlement(runtime, parent)
    expect((await ownEvents(c, started.subagentId as string))[0]!.data).toMatchObject({
      mode: 'continuable',
      provider: 'spawn',
      label: 'count',
    })
  })

  it('run_in_background: false waits for a one-shot child and returns its final text; one that fails is a typed error carrying its partial answer', async () => {
    const { c, call, parent, tool } = await host()
    const answered = await call('subagent', { description: 'quick sum', prompt: '2+2', run_in_background: false }, parent)
    const runId = answered.runId as string
    expect(answered).toEqual({ text: 'done: 2+2', kind: 'foreground', runId, output: 'done: 2+2' })
    expect((await ownEvents(c, runId))[0]!.data).toMatchObject({ mode: 'one-shot', label: 'quick sum' })
    // A one-shot child is not in the model's listing.
    expect((await call('list_agents', {}, parent)).text).toBe('(no subagents)')

    const error = await tool('subagent')
      .execute({ description: 'broken', prompt: 'try', run_in_background: false }, { agent: parent })
      .catch((e: unknown) => e)
    expect(isDshError(error, 'TOOL_SUBAGENT_CONTROL_SUBAGENT_FAILED')).toBe(true)
    expect((error as Error).message).toMatch(
      /^Subagent \S+ failed before it finished\.\nDetail: the model went away\nWhat it had written before it ended:\nhalf of it$/,
    )
  })

  it("a background child's settlement reaches the parent as a notice on its next turn, phrased as the harness does; a waiting caller gets woken", async () => {
    const { runtime, runs, parent, held } = await host()
    // The parent's first turn starts a background child and ends; the child is still working.
    await runtime.drive(parent, { prompt: 'plan' }).done
    const id = (parent.events.find((e) => e.type === 'tool/result')!.data as unknown as { content: { subagentId: string } }).content
      .subagentId
    expect(runtime.isRunning(id)).toBe(true)
    const woken = waitForChildSettlement(runtime, parent)
    held.open()
    expect(await woken).toBe(true)
    // Nothing is running any more: no wake-up is due.
    expect(await waitForChildSettlement(runtime, parent)).toBe(false)
    const [notice] = noticesOf(parent)
    expect(notice).toEqual({
      kind: 'settled',
      child: id,
      mode: 'continuable',
      label: 'held reviewer',
      reason: 'completed',
      text: 'held done',
    })
    // The parent's next turn receives it, and the harness phrasing is what a model reads.
    await runtime.drive(parent).done
    expect(runs.at(-1)!.notices).toEqual([notice])
    expect(harnessNotices['subagent/notice']!(notice as never)).toBe(
      `Background subagent ${id} has finished; it does nothing more until you send_message it.\nIts last message:\nheld done`,
    )
  })

  it("a background child's own background subagent: it waits for it (idle in list_agents), is woken by its settlement, and the parent hears both runs", async () => {
    const { c, runtime, runs, call, parent, held } = await host()
    const firstNotice = new Promise<void>((resolve) => {
      const off: () => void = c.on('session/event', (session, event): void => {
        if (session.id !== parent.id || event.type !== 'subagent/notice') return
        off()
        resolve()
      })
    })
    const spawner = (await call('subagent', { description: 'spawner', prompt: 'delegate' }, parent)).subagentId as string
    // The spawner's first turn settles; its parent is told more turns follow.
    await firstNotice
    expect(runtime.isWaiting(spawner)).toBe(true)
    expect(runtime.isRunning(spawner)).toBe(false)
    const [first] = noticesOf(parent)
    expect(first).toMatchObject({ kind: 'settled', child: spawner, reason: 'completed', text: 'spawned it', waiting: true })
    expect(harnessNoticeText(first!)).toMatch(/^Background subagent \S+ has finished its turn\.\nSubagents it started are still working/)
    expect((await call('list_agents', {}, parent)).text).toBe(`${spawner} [idle] — spawner`)
    const grandkid = runs.find((run) => run.identity?.label === 'held grandkid')!.session.id

    // The wake-up a top-level caller waits for counts the waiting child as busy.
    const woken = waitForChildSettlement(runtime, parent)
    held.open()
    expect(await woken).toBe(true)
    const spawnerRuns = runs.filter((run) => run.session.id === spawner)
    expect(spawnerRuns.map((run) => run.kind)).toEqual(['spawn', 'message'])
    expect(spawnerRuns[1]!.notices).toEqual([
      { kind: 'settled', child: grandkid, mode: 'continuable', label: 'held grandkid', reason: 'completed', text: 'held done' },
    ])
    expect(noticesOf(parent).map((n) => (n.kind === 'settled' ? [n.text, n.waiting] : n.kind))).toEqual([
      ['spawned it', true],
      ['got: held done', undefined],
    ])
    expect(await waitForChildSettlement(runtime, parent)).toBe(false)
  })

  it('phrases every ending and a report; a one-shot settlement (the waited-for result) is not shown again', () => {
    const base = { kind: 'settled', child: 'c1' as SessionId, mode: 'continuable', label: 'l' } as const
    expect(harnessNoticeText({ ...base, reason: 'cancelled' as const })).toBe(
      'Background subagent c1 was stopped before it finished.\nIt left no final message.',
    )
    expect(harnessNoticeText({ ...base, reason: 'error' as const, error: 'X: boom', text: 'partial' })).toBe(
      'Background subagent c1 failed before it finished.\nError: X: boom\nIts last message:\npartial',
    )
    expect(harnessNoticeText({ ...base, mode: 'one-shot', reason: 'completed', text: 'x' })).toBeUndefined()
    // A report names the child as it was started: in the background, or waited for (or, when the notice does not say, neither).
    const report = { kind: 'report', child: 'c1' as SessionId, text: 'halfway' } as const
    expect(harnessNoticeText({ ...report, mode: 'continuable' })).toBe('Background subagent c1 reports:\nhalfway')
    expect(harnessNoticeText({ ...report, mode: 'one-shot' })).toBe('Subagent c1 reports:\nhalfway')
    expect(harnessNoticeText(report)).toBe('Subagent c1 reports:\nhalfway')
    expect(harnessNoticeText({ ...base, reason: 'completed' as const, text: 'half', waiting: true as const })).toBe(
      'Background subagent c1 has finished its turn.\nSubagents it started are still working: it takes another turn each time one of them finishes, and you get a notice after each.\nIts last message:\nhalf',
    )
    expect(harnessNotices['subagent/notice']!({ kind: 'other' })).toBeUndefined()
    expect(harnessNotices['subagent/notice']!('text')).toBeUndefined()
  })
})

describe('send_message, interrupt_agent, report (harness)', () => {
  it('send_message starts an idle child or queues behind a busy one; only the parent may send', async () => {
    const { runtime, call, parent, stranger, held, tool } = await host()
    const busy = (await call('subagent', { description: 'held worker', prompt: 'work' }, parent)).subagentId as string
    expect(await call('send_message', { subagent_id: busy, message: 'then this' }, parent)).toEqual({
      text: `message queued as the next turn for subagent ${busy}`,
      subagentId: busy,
      status: 'queued',
      position: 1,
    })
    expect(await codeOf(tool('send_message').execute({ subagent_id: busy, message: 'x' }, { agent: stranger }))).toBe(
      'SUBAGENT_UNAUTHORIZED',
    )
    held.open()
    await waitForChildSettlement(runtime, parent)
    expect(noticesOf(parent).map((n) => (n.kind === 'settled' ? n.text : undefined))).toEqual(['held done', 'done: then this'])
    expect(await call('send_message', { subagent_id: busy, message: 'and more' }, parent)).toEqual({
      text: `message queued as the next turn for subagent ${busy}`,
      subagentId: busy,
      status: 'started',
    })
    await waitForChildSettlement(runtime, parent)
    expect(noticesOf(parent).at(-1)).toMatchObject({ kind: 'settled', child: busy, text: 'done: and more' })
    expect(await codeOf(tool('send_message').execute({ subagent_id: 'ghost', message: 'x' }, { agent: parent }))).toBe('SUBAGENT_NOT_FOUND')
  })

  it('interrupt_agent returns as soon as the stop is requested, before the turn has ended', async () => {
    const { c, runtime, call, parent, release } = await host()
    const id = (await call('subagent', { description: 'stubborn', prompt: 'dig' }, parent)).subagentId as string
    let settled = false
    const done = runtime.wait([id], { caller: parent }).then(() => (settled = true))
    expect(await call('interrupt_agent', { agent_id: id }, parent)).toEqual({
      text: `interrupt requested for agent ${id}`,
      agentId: id,
      accepted: true,
      running: true,
    })
    // The child has been asked to stop but has not stopped yet.
    expect(runtime.isRunning(id)).toBe(true)
    expect(settled).toBe(false)
    release.open()
    await done
    expect((await ownEvents(c, id)).filter((e) => e.type === 'subagent/end').map((e) => e.data)).toEqual([{ turn: 1, reason: 'cancelled' }])
  })

  it('interrupt_agent parks what was queued: nothing runs after the stop; the next send_message delivers it first, then its own', async () => {
    const { c, runtime, runs, call, parent, release } = await host()
    const id = (await call('subagent', { description: 'stubborn', prompt: 'dig' }, parent)).subagentId as string
    expect(await call('send_message', { subagent_id: id, message: 'and the tests' }, parent)).toMatchObject({
      status: 'queued',
      position: 1,
    })
    expect(await call('send_message', { subagent_id: id, message: 'and the docs' }, parent)).toMatchObject({
      status: 'queued',
      position: 2,
    })
    expect(await call('interrupt_agent', { agent_id: id }, parent)).toMatchObject({ accepted: true, running: true })
    release.open()
    await runtime.wait([id], { caller: parent })
    const prompts = () => runs.filter((run) => run.session.id === id).map((run) => run.prompt)
    expect(prompts()).toEqual(['dig'])
    expect(runtime.isRunning(id)).toBe(false)
    const parked = await ownEvents(c, id)
    expect(parked.filter((e) => e.type === 'subagent/queued').map((e) => e.data)).toEqual([
      { from: 'parent', text: 'and the tests' },
      { from: 'parent', text: 'and the docs' },
    ])
    expect(parked.filter((e) => e.type === 'subagent/start')).toHaveLength(1)
    expect(noticesOf(parent).map((n) => n.kind === 'settled' && n.reason)).toEqual(['cancelled'])

    expect(await call('send_message', { subagent_id: id, message: 'and the changelog' }, parent)).toMatchObject({ status: 'started' })
    await runtime.wait([id], { caller: parent })
    expect(prompts()).toEqual(['dig', 'and the tests', 'and the docs', 'and the changelog'])
    expect(noticesOf(parent).map((n) => (n.kind === 'settled' ? [n.reason, n.text] : n.kind))).toEqual([
      ['cancelled', undefined],
      ['completed', 'done: and the tests'],
      ['completed', 'done: and the docs'],
      ['completed', 'done: and the changelog'],
    ])
  })

  it('interrupt_agent on a finished child is an accepted no-op; a stranger or an unknown id is refused', async () => {
    const { c, runtime, call, parent, stranger, tool } = await host()
    const id = (await call('subagent', { description: 'quick', prompt: 'go' }, parent)).subagentId as string
    await waitForChildSettlement(runtime, parent)
    const before = await ownEvents(c, id)
    expect(await call('interrupt_agent', { agent_id: id }, parent)).toEqual({
      text: `interrupt requested for agent ${id}`,
      agentId: id,
      accepted: true,
      running: false,
    })
    expect(await ownEvents(c, id)).toEqual(before)
    expect(await codeOf(tool('interrupt_agent').execute({ agent_id: id }, { agent: stranger }))).toBe('SUBAGENT_UNAUTHORIZED')
    expect(await codeOf(tool('interrupt_agent').execute({ agent_id: 'ghost' }, { agent: parent }))).toBe('SUBAGENT_NOT_FOUND')
  })

  it("report reaches the parent as a notice from the child's own turn; a top-level session has nobody to report to", async () => {
    const { runtime, call, parent, tool } = await host()
    const id = (await call('subagent', { description: 'reporter', prompt: 'look' }, parent)).subagentId as string
    await waitForChildSettlement(runtime, parent)
    const [report] = noticesOf(parent)
    expect(report).toEqual({ kind: 'report', child: id, mode: 'continuable', label: 'reporter', text: 'found the flaky test' })
    expect(harnessNoticeText(report!)).toBe(`Background subagent ${id} reports:\nfound the flaky test`)
    // One the parent waited for (run_in_background false) is not called a background subagent.
    const waited = (await call('subagent', { description: 'reporter', prompt: 'look', run_in_background: false }, parent)).runId as string
    const waitedReport = noticesOf(parent).find((n) => n.kind === 'report' && n.child === waited)!
    expect(waitedReport).toMatchObject({ mode: 'one-shot' })
    expect(harnessNoticeText(waitedReport)).toBe(`Subagent ${waited} reports:\nfound the flaky test`)
    expect(await codeOf(tool('report').execute({ output: 'hello' }, { agent: parent }))).toBe('SUBAGENT_NOT_A_SUBAGENT')
  })
})
