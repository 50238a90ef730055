import { Context, isDshError } from '@dsh/context'
import { ID_MAX_LENGTH } from '@dsh/protocol/limits'
import { type Session, sessionStorePlugin } from '@dsh/session'
import { createMemoryPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { createSessionQuery } from '@dsh/session-query'
import { createScriptedDriver, type SubagentDriver, type SubagentRun, subagentsPlugin } from '@dsh/subagent'
import { afterEach, describe, expect, it } from 'vitest'
import { NAME_MAX_CHARS, RESULT_TEXT_MAX_CHARS, type SubagentControlDialect, subagentControlTools, TEXT_MAX_CHARS } from '../src/index.js'
import { codeOf, gate } from './support.js'

let ctx: Context | undefined
afterEach(async () => {
  await ctx?.dispose()
  ctx = undefined
})

/** A child's final message: `big` answers BIG (a million characters of two UTF-8 bytes each), anything else `done`. */
const BIG = 'é'.repeat(1_000_000)

/**
 * A real host over memory persistence whose coordinator the test can flush.
 * The scripted parent runs the calls its prompt names (JSON); children answer
 * BIG when their prompt is `big`.
 */
async function host(driver?: SubagentDriver) {
  ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
  const flushers: ((session: Session) => Promise<void>)[] = []
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(
    sessionPersistencePlugin(createMemoryPersistence(), {
      writeBehindMs: 0,
      onCoordinator: (coordinator) => flushers.push((session) => coordinator.flush(session)),
    }),
  )
  ctx.provide('sessionQuery', createSessionQuery({ sessions: ctx.require('sessions'), persistence: ctx.require('sessionPersistence') }))
  const script = (run: SubagentRun) =>
    run.identity === undefined
      ? [...(JSON.parse(run.prompt ?? '[]') as never[]), { kind: 'message' as const, text: 'done' }]
      : [{ kind: 'message' as const, text: run.prompt === 'big' ? BIG : run.prompt === 'json' ? JSON.stringify(BIG) : 'done' }]
  await ctx.activate(
    subagentsPlugin({ driver: driver ?? createScriptedDriver(script), tools: (_agent, runtime) => subagentControlTools(runtime) }),
  )
  const runtime = ctx.require('subagents')
  const sessions = ctx.require('sessions')
  const tools = (dialect: SubagentControlDialect = 'dsh') => subagentControlTools(runtime, { dialect })
  return {
    runtime,
    parent: sessions.create({ id: 'parent' }),
    flush: (session: Session) => flushers[0]!(session),
    tool: (name: string, dialect?: SubagentControlDialect) => tools(dialect).find((tool) => tool.name === name)!,
  }
}

const childrenOf = async (runtime: { explainChildren(id: string): Promise<unknown[]> }, id = 'parent') =>
  (await runtime.explainChildren(id)).length

describe('what a model may send', () => {
  it('refuses text, names and ids past their bounds before anything is written', async () => {
    const { runtime, parent, tool } = await host()
    const long = 'x'.repeat(TEXT_MAX_CHARS + 1)
    const child = (await tool('subagent').execute({ prompt: 'a', mode: 'continuable', label: 'c' }, { agent: parent })) as unknown as {
      id: string
    }
    const calls: [string, unknown, SubagentControlDialect?][] = [
      ['subagent', { prompt: long }],
      ['subagent', { prompt: 'a', instructions: long }],
      ['subagent', { prompt: 'a', model: 'm'.repeat(NAME_MAX_CHARS + 1) }],
      ['subagent', { prompt: 'a', tools: { allow: Array.from({ length: 257 }, (_, i) => `t${i}`) } }],
      ['subagent', { prompt: long, description: 'd' }, 'harness'],
      ['subagent', { prompt: 'a', description: 'd'.repeat(NAME_MAX_CHARS + 1) }, 'harness'],
      ['send_message', { id: child.id, message: long }],
      ['send_message', { subagent_id: child.id, message: long }, 'harness'],
      ['send_message', { id: 'i'.repeat(ID_MAX_LENGTH + 1), message: 'a' }],
      ['wait_agents', { ids: [child.id, 'i'.repeat(ID_MAX_LENGTH + 1)] }],
      ['interrupt_agent', { id: 'i'.repeat(ID_MAX_LENGTH + 1) }],
      ['interrupt_agent', { agent_id: 'i'.repeat(ID_MAX_LENGTH + 1) }, 'harness'],
      ['close_agent', { id: 'i'.repeat(ID_MAX_LENGTH + 1) }],
    ]
    const before = (await runtime.wait([child.id], { caller: parent }))[0]
    for (const [name, input, dialect] of calls) {
      let message = ''
      const code = await codeOf(
        tool(name, dialect)
          .execute(input, { agent: parent })
          .catch((error: Error) => {
            message = error.message
            throw error
          }),
      )
      expect({ name, code }).toEqual({ name, code: 'TOOL_SUBAGENT_CONTROL_INVALID_INPUT' })
      expect(message).toMatch(/Too big/)
      expect(message.length).toBeLessThan(1000)
    }
    expect(await childrenOf(runtime)).toBe(1)
    expect((await runtime.wait([child.id], { caller: parent }))[0]).toEqual(before)
  })

  it('refuses an outputSchema nested past the bound with a typed error, and starts nothing', async () => {
    const { runtime, parent, tool } = await host()
    let deep: Record<string, unknown> = {}
    for (let level = 0; level < 5000; level++) deep = { items: deep }
    const error = await tool('subagent')
      .execute({ prompt: 'a', outputSchema: { type: 'array', items: deep } }, { agent: parent })
      .catch((caught: unknown) => caught)
    expect(isDshError(error, 'TOOL_SUBAGENT_CONTROL_INVALID_INPUT')).toBe(true)
    expect((error as Error).message).toContain('outputSchema: the schema nests deeper than 64 levels')
    const wide = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`p${i}`, { type: 'string' }]))
    expect(await codeOf(tool('subagent').execute({ prompt: 'a', outputSchema: { properties: wide } }, { agent: parent }))).toBe(
      'TOOL_SUBAGENT_CONTROL_INVALID_INPUT',
    )
    expect(await childrenOf(runtime)).toBe(0)
  })

  it("names a few of an input's problems, each cut short, however large the input", async () => {
    const { parent, tool } = await host()
    const keys = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`key${i}`, i]))
    const failures = [
      { prompt: 'a', ...keys },
      { prompt: 'a', ['k'.repeat(1_000_000)]: 1 },
      { prompt: 1, label: 2, mode: 3, context: 4, wait: 5, instructions: 6, persona: 7, model: 8, tools: 9, budget: 10 },
    ]
    for (const input of failures) {
      const error = (await tool('subagent')
        .execute(input, { agent: parent })
        .catch((caught: unknown) => caught)) as Error & { code: string; details: { issues: unknown[]; count: number } }
      expect(error.code).toBe('TOOL_SUBAGENT_CONTROL_INVALID_INPUT')
      expect(error.message.length).toBeLessThan(3000)
      expect(error.details.issues.length).toBeLessThanOrEqual(8)
    }
    const many = (await tool('subagent')
      .execute(failures[2], { agent: parent })
      .catch((caught: unknown) => caught)) as Error & { details: { count: number } }
    expect(many.details.count).toBe(10)
    expect(many.message).toContain('; and 2 more)')
  })
})

describe('what a result carries', () => {
  it("cuts the final messages a wait_agents call returns, so the parent's log still persists", async () => {
    const { parent, flush, runtime } = await host()
    const start = (prompt: string) => ({ kind: 'call', name: 'subagent', arguments: { prompt, wait: false } })
    const starts = [start('small'), ...Array.from({ length: 5 }, () => start('big'))]
    await runtime.drive(parent, { prompt: JSON.stringify(starts) }).done
    const ids = parent.events
      .filter((event) => event.type === 'tool/result')
      .flatMap((event) => {
        const content = (event.data as { content?: { id?: string } }).content
        return content?.id === undefined ? [] : [content.id]
      })
    expect(ids).toHaveLength(6)
    await runtime.drive(parent, { prompt: JSON.stringify([{ kind: 'call', name: 'wait_agents', arguments: { ids } }]) }).done
    const waited = parent.events.filter((event) => event.type === 'tool/result').at(-1)!.data as unknown as {
      content: { text: string; agents: { text?: string }[] }
    }
    const texts = waited.content.agents.map((agent) => agent.text ?? '')
    expect(texts[0]).toBe('done')
    expect(texts.slice(1).every((text) => text.includes('more characters cut'))).toBe(true)
    expect(texts.reduce((sum, text) => sum + text.length, 0)).toBeLessThan(RESULT_TEXT_MAX_CHARS + 1000)
    await expect(flush(parent)).resolves.toBeUndefined()
  })

  it('cuts a one-shot result past the bound and leaves out its parsed output', async () => {
    const { parent, tool } = await host()
    const result = (await tool('subagent').execute({ prompt: 'json', outputSchema: { type: 'string' } }, { agent: parent })) as unknown as {
      status: string
      result: string
      output?: unknown
    }
    expect(result.status).toBe('completed')
    expect(result.result.length).toBeLessThan(RESULT_TEXT_MAX_CHARS + 200)
    expect(result.result).toMatch(/\[… \d+ more characters cut/)
    expect(result.output).toBeUndefined()
    const foreground = (await tool('subagent', 'harness').execute(
      { description: 'd', prompt: 'big', run_in_background: false },
      { agent: parent },
    )) as unknown as { output: string }
    expect(foreground.output.length).toBeLessThan(RESULT_TEXT_MAX_CHARS + 200)
  })
})

describe('cancellation', () => {
  it('a call that arrives with its signal aborted starts, sends and stops nothing', async () => {
    const { runtime, parent, tool } = await host()
    const child = (await tool('subagent').execute({ prompt: 'a', mode: 'continuable', label: 'c' }, { agent: parent })) as unknown as {
      id: string
    }
    await runtime.wait([child.id], { caller: parent })
    const aborted = { agent: parent, signal: AbortSignal.abort() }
    const before = (await runtime.wait([child.id], { caller: parent }))[0]
    for (const input of [{ prompt: 'a' }, { prompt: 'a', wait: false }, { prompt: 'a', mode: 'continuable', label: 'd' }])
      expect(await codeOf(tool('subagent').execute(input, aborted))).toBe('CANCELLED')
    expect(await codeOf(tool('subagent', 'harness').execute({ description: 'd', prompt: 'a' }, aborted))).toBe('CANCELLED')
    expect(await codeOf(tool('send_message').execute({ id: child.id, message: 'more' }, aborted))).toBe('CANCELLED')
    expect(await codeOf(tool('close_agent').execute({ id: child.id }, aborted))).toBe('CANCELLED')
    expect(await childrenOf(runtime)).toBe(1)
    expect((await runtime.wait([child.id], { caller: parent }))[0]).toEqual(before)
  })

  it('interrupt_agent and close_agent stop waiting for the turn to end when the caller is cancelled', async () => {
    // A model edge that finishes the step it is in before it notices the abort.
    const held = gate()
    const driver: SubagentDriver = {
      name: 'slow',
      async run(run) {
        if (run.identity === undefined) return { reason: 'completed' }
        await held.promise
        return run.signal.aborted ? { reason: 'cancelled' } : { reason: 'completed', text: 'done' }
      },
    }
    const { runtime, parent, tool } = await host(driver)
    const child = (await tool('subagent').execute({ prompt: 'a', mode: 'continuable', label: 'c' }, { agent: parent })) as unknown as {
      id: string
    }
    for (const name of ['interrupt_agent', 'close_agent']) {
      const caller = new AbortController()
      const call = codeOf(tool(name).execute({ id: child.id }, { agent: parent, signal: caller.signal }))
      caller.abort()
      expect(await call).toBe('CANCELLED')
    }
    held.open()
    const [settled] = await runtime.wait([child.id], { caller: parent })
    expect(settled).toMatchObject({ state: 'closed' })
  })
})
