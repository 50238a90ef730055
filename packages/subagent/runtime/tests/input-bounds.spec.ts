import { isDshError } from '@dsh/context'
import { EVENT_MAX_BYTES } from '@dsh/session-persistence/backend'
import { describe, expect, it } from 'vitest'
import {
  createScriptedDriver,
  INPUT_TEXT_MAX_CHARS,
  REPORT_TEXT_MAX_CHARS,
  SETTINGS_MAX_DEPTH,
  SETTINGS_MAX_VALUES,
  SPAWN_INSTRUCTIONS_MAX_CHARS,
  SPAWN_LABEL_MAX_CHARS,
  SPAWN_NAME_MAX_CHARS,
  SPAWN_PERSONA_MAX_CHARS,
  SubagentError,
  type SubagentSettings,
} from '../src/index.js'
import { codeOf, gate, holdScript, hostsPerTest } from './helpers.js'

const hosts = hostsPerTest()

/** What `op` throws (`undefined` when it returns). */
async function thrown(op: () => unknown): Promise<unknown> {
  try {
    await op()
  } catch (error) {
    return error
  }
  return undefined
}

/** The worst case for a log line: every character escapes to six bytes of JSON (`\u0001`). */
const escaped = (length: number): string => '\u0001'.repeat(length)

type OutputSchema = NonNullable<SubagentSettings['outputSchema']>

/** `{ type: 'array', items: … }` nested `objects` objects deep, as an `outputSchema`. */
function nestedSchema(objects: number): OutputSchema {
  let schema: OutputSchema = { type: 'string' }
  for (let i = 1; i < objects; i++) schema = { type: 'array', items: schema }
  return schema
}

describe('the runtime bounds a caller’s text before it writes anything', () => {
  it('holds a text to INPUT_TEXT_MAX_CHARS, below what any event a store accepts can carry', () => {
    expect(INPUT_TEXT_MAX_CHARS * 6).toBeLessThan(EVENT_MAX_BYTES)
    // No tighter than the control tools' 1 MiB of text: whatever they pass through, the runtime takes.
    expect(INPUT_TEXT_MAX_CHARS).toBeGreaterThanOrEqual(1_048_576)
  })

  it('refuses an over-long spawn prompt with SUBAGENT_INVALID_ARGUMENT naming the limit, and creates no child', async () => {
    const h = await hosts.open()
    const parent = h.sessions.create({ id: 'parent' })
    const before = parent.events.length
    for (const prompt of ['x'.repeat(INPUT_TEXT_MAX_CHARS + 1), escaped(3_000_000)]) {
      const error = await thrown(() => h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', prompt, id: 'child' }))
      expect(error).toBeInstanceOf(SubagentError)
      expect(error).toMatchObject({ code: 'SUBAGENT_INVALID_ARGUMENT', details: { length: prompt.length, max: INPUT_TEXT_MAX_CHARS } })
      expect((error as Error).message).toContain(`at most ${INPUT_TEXT_MAX_CHARS} characters (INPUT_TEXT_MAX_CHARS)`)
    }
    expect(h.sessions.get('child')).toBeUndefined()
    expect(await h.runtime.listChildren(parent.id)).toEqual([])
    expect(parent.events.length).toBe(before)
    expect(h.runtime.isRunning('child')).toBe(false)
  })

  it('takes a prompt of exactly INPUT_TEXT_MAX_CHARS worst-case characters, and a store persists it', async () => {
    const h = await hosts.open({ driver: createScriptedDriver([{ kind: 'message', text: 'read it' }]) })
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', prompt: escaped(INPUT_TEXT_MAX_CHARS) })
    // The child goes cold once its run settles: its log, prompt included, was stored.
    expect((await child.done).end).toBe('completed')
    const stored = await h.persistence!.inspect(child.id)
    const message = stored.events.find((e) => e.type === 'user/message')!
    expect((message.data as { text: string }).text.length).toBe(INPUT_TEXT_MAX_CHARS)
    expect(h.errors).toEqual([])
  })

  it('refuses an over-long message to an idle (cold) child or a busy one, and to resume and drive, writing nothing', async () => {
    const hold = gate()
    const h = await hosts.open({
      driver: createScriptedDriver((run) => (run.prompt === 'hold' ? holdScript(hold.promise) : [{ kind: 'message', text: 'ok' }])),
    })
    const parent = h.sessions.create()
    const idle = h.runtime.spawn(parent, { mode: 'continuable', label: 'idle', context: 'fresh', prompt: 'go' })
    await idle.done
    const busy = h.runtime.spawn(parent, { mode: 'continuable', label: 'busy', context: 'fresh', prompt: 'hold' })
    const idleEvents = (await h.persistence!.inspect(idle.id)).events.length
    const tooLong = escaped(3_000_000)

    expect(await codeOf(h.runtime.send(idle.id, { caller: parent, text: tooLong }))).toBe('SUBAGENT_INVALID_ARGUMENT')
    expect(await codeOf(h.runtime.resume(idle.id, { caller: parent, prompt: tooLong }))).toBe('SUBAGENT_INVALID_ARGUMENT')
    expect(h.sessions.get(idle.id)).toBeUndefined()
    expect((await h.persistence!.inspect(idle.id)).events.length).toBe(idleEvents)

    const error = await thrown(() => h.runtime.send(busy.id, { caller: parent, text: 'y'.repeat(INPUT_TEXT_MAX_CHARS + 1) }))
    expect(isDshError(error, 'SUBAGENT_INVALID_ARGUMENT')).toBe(true)
    expect((error as Error).message).toMatch(/^A message is at most/)
    expect(h.runtime.queuedCount(busy.id)).toBe(0)
    // Its driver keeps appending to the running turn; of input, the log holds only the spawn's prompt.
    const inputs = busy.session.events.filter((e) => e.type === 'user/message' || e.type === 'subagent/queued')
    expect(inputs.map((e) => [e.type, e.data])).toEqual([['user/message', { text: 'hold' }]])

    const top = h.sessions.create()
    expect(await codeOf(() => h.runtime.drive(top, { prompt: tooLong }))).toBe('SUBAGENT_INVALID_ARGUMENT')
    expect(top.events).toEqual([])
    expect(h.runtime.isRunning(top.id)).toBe(false)

    hold.open()
    expect((await busy.done).end).toBe('completed')
    expect(h.errors).toEqual([])
  })
})

describe('spawn settings: nesting is bounded, never a stack overflow', () => {
  it('refuses settings nested deeper than SETTINGS_MAX_DEPTH with SUBAGENT_INVALID_DESCRIPTOR, and creates no child', async () => {
    const h = await hosts.open()
    const parent = h.sessions.create({ id: 'parent' })
    let deepArray: unknown = []
    for (let i = 0; i < 100_000; i++) deepArray = [deepArray]
    const cyclic: Record<string, unknown> = { type: 'object' }
    cyclic.properties = { self: cyclic }
    const refused = [
      { outputSchema: nestedSchema(100_000) },
      { outputSchema: { type: 'array', items: deepArray } },
      { outputSchema: cyclic },
      // The settings object is depth 1: an outputSchema chain of SETTINGS_MAX_DEPTH objects is one level too deep.
      { outputSchema: nestedSchema(SETTINGS_MAX_DEPTH) },
    ]
    for (const settings of refused) {
      const error = await thrown(() =>
        h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', settings: settings as never, id: 'c' }),
      )
      expect(error).toBeInstanceOf(SubagentError)
      expect(error).toMatchObject({ code: 'SUBAGENT_INVALID_DESCRIPTOR', details: { max: SETTINGS_MAX_DEPTH } })
      expect((error as Error).message).toContain(`deeper than ${SETTINGS_MAX_DEPTH} levels`)
    }
    expect(h.sessions.get('c')).toBeUndefined()
    expect(await h.runtime.listChildren(parent.id)).toEqual([])
  })

  it('refuses settings that share objects until they expand past SETTINGS_MAX_VALUES: the walk stops at the bound', async () => {
    const h = await hosts.open()
    const parent = h.sessions.create({ id: 'parent' })
    // 60 levels, each naming the next level twice: 2^60 paths as JSON would write them, 120 objects in memory.
    let shared: Record<string, unknown> = { type: 'string' }
    for (let i = 0; i < 60; i++) shared = { type: 'object', properties: { a: shared, b: shared } }
    const error = await thrown(() =>
      h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', settings: { outputSchema: shared } as never, id: 'c' }),
    )
    expect(error).toMatchObject({ code: 'SUBAGENT_INVALID_DESCRIPTOR', details: { max: SETTINGS_MAX_VALUES } })
    expect((error as Error).message).toContain(`more than ${SETTINGS_MAX_VALUES} values`)
    expect(h.sessions.get('c')).toBeUndefined()
  })

  it('takes settings exactly SETTINGS_MAX_DEPTH deep, validates the output against them and stores them', async () => {
    const h = await hosts.open({ driver: createScriptedDriver([{ kind: 'message', text: '[[["deep"]]]' }]) })
    const parent = h.sessions.create()
    const outputSchema = nestedSchema(SETTINGS_MAX_DEPTH - 1)
    const child = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', settings: { outputSchema } })
    const settled = await child.done
    // Three arrays deep, where the schema asks for many more: a mismatch, found by the validator, not a crash.
    expect(settled.end).toBe('invalid-output')
    expect(settled.error).toMatchObject({ code: 'SUBAGENT_INVALID_OUTPUT' })
    const options = (await h.persistence!.inspect(child.id)).events.find((e) => e.type === 'subagent/options')
    expect(options?.data).toEqual({ version: 1, outputSchema })
    expect(h.errors).toEqual([])
  })
})

describe('a report is bounded before it is written', () => {
  it('holds a report to REPORT_TEXT_MAX_CHARS, below what any event a store accepts can carry', () => {
    expect(REPORT_TEXT_MAX_CHARS * 6).toBeLessThan(EVENT_MAX_BYTES)
    // No tighter than the control tools' 20,000 characters of report.
    expect(REPORT_TEXT_MAX_CHARS).toBeGreaterThanOrEqual(20_000)
  })

  it('takes a report of exactly REPORT_TEXT_MAX_CHARS worst-case characters, refuses one more, and the parent persists only the first', async () => {
    const hold = gate()
    const h = await hosts.open({ driver: createScriptedDriver(holdScript(hold.promise)) })
    const parent = h.sessions.create({ id: 'parent' })
    const child = h.runtime.spawn(parent, { mode: 'one-shot', label: escaped(SPAWN_LABEL_MAX_CHARS), context: 'fresh', prompt: 'go' })
    const notices = (): number => parent.events.filter((e) => e.type === 'subagent/notice').length

    const error = await thrown(() => h.runtime.report(child.session, escaped(REPORT_TEXT_MAX_CHARS + 1)))
    expect(error).toBeInstanceOf(SubagentError)
    expect(error).toMatchObject({
      code: 'SUBAGENT_INVALID_ARGUMENT',
      details: { length: REPORT_TEXT_MAX_CHARS + 1, max: REPORT_TEXT_MAX_CHARS },
    })
    expect((error as Error).message).toContain(`at most ${REPORT_TEXT_MAX_CHARS} characters (REPORT_TEXT_MAX_CHARS)`)
    expect((error as Error).message).toContain('nothing was written')
    expect(notices()).toBe(0)

    const notice = h.runtime.report(child.session, escaped(REPORT_TEXT_MAX_CHARS))
    expect(notice).toMatchObject({ kind: 'report', label: escaped(SPAWN_LABEL_MAX_CHARS) })
    expect(notice.text?.length).toBe(REPORT_TEXT_MAX_CHARS)
    expect(notices()).toBe(1)
    hold.open()
    expect((await child.done).end).toBe('completed')
    // The parent goes cold: its log, the longest report with the longest label included, was stored.
    await h.sessions.dispose(parent.id)
    const stored = (await h.persistence!.inspect(parent.id)).events.filter((e) => e.type === 'subagent/notice')
    expect(stored.map((e) => (e.data as { kind: string }).kind)).toEqual(['report', 'settled'])
    expect((stored[0]!.data as { text: string }).text.length).toBe(REPORT_TEXT_MAX_CHARS)
    expect(h.errors).toEqual([])
  })
})

describe('a spawn’s label, names, persona and instructions are bounded before anything is written', () => {
  it('derives SPAWN_INSTRUCTIONS_MAX_CHARS from EVENT_MAX_BYTES and takes what the control tools pass through', () => {
    const others = (SPAWN_PERSONA_MAX_CHARS + 3 * SPAWN_NAME_MAX_CHARS) * 6
    expect(SPAWN_INSTRUCTIONS_MAX_CHARS * 6 + others).toBeLessThan(EVENT_MAX_BYTES)
    // An agent definition's body (at most 256 KiB) joined to the tools' 1 MiB of inline instructions.
    expect(SPAWN_INSTRUCTIONS_MAX_CHARS).toBeGreaterThanOrEqual(256 * 1024 + 2 + 1_048_576)
    expect(SPAWN_PERSONA_MAX_CHARS).toBeGreaterThanOrEqual(10_000)
    expect(SPAWN_LABEL_MAX_CHARS).toBeGreaterThanOrEqual(200)
  })

  it('refuses each field one character over its bound with SUBAGENT_INVALID_DESCRIPTOR naming it, and creates no child', async () => {
    const h = await hosts.open()
    const parent = h.sessions.create({ id: 'parent' })
    const before = parent.events.length
    const over = (max: number): string => 'x'.repeat(max + 1)
    const refused: [
      field: string,
      max: number,
      limit: string,
      spawn: { label?: string; provider?: string; agentPreset?: string; settings?: SubagentSettings },
    ][] = [
      ['label', SPAWN_LABEL_MAX_CHARS, 'SPAWN_LABEL_MAX_CHARS', { label: over(SPAWN_LABEL_MAX_CHARS) }],
      ['provider', SPAWN_NAME_MAX_CHARS, 'SPAWN_NAME_MAX_CHARS', { provider: over(SPAWN_NAME_MAX_CHARS) }],
      ['agentPreset', SPAWN_NAME_MAX_CHARS, 'SPAWN_NAME_MAX_CHARS', { agentPreset: over(SPAWN_NAME_MAX_CHARS) }],
      ['agentProvider', SPAWN_NAME_MAX_CHARS, 'SPAWN_NAME_MAX_CHARS', { settings: { agentProvider: over(SPAWN_NAME_MAX_CHARS) } }],
      ['agentModel', SPAWN_NAME_MAX_CHARS, 'SPAWN_NAME_MAX_CHARS', { settings: { agentModel: over(SPAWN_NAME_MAX_CHARS) } }],
      ['model', SPAWN_NAME_MAX_CHARS, 'SPAWN_NAME_MAX_CHARS', { settings: { model: over(SPAWN_NAME_MAX_CHARS) } }],
      ['persona', SPAWN_PERSONA_MAX_CHARS, 'SPAWN_PERSONA_MAX_CHARS', { settings: { persona: over(SPAWN_PERSONA_MAX_CHARS) } }],
      [
        'instructions',
        SPAWN_INSTRUCTIONS_MAX_CHARS,
        'SPAWN_INSTRUCTIONS_MAX_CHARS',
        { settings: { instructions: over(SPAWN_INSTRUCTIONS_MAX_CHARS) } },
      ],
    ]
    for (const [field, max, limit, spawn] of refused) {
      for (const mode of ['one-shot', 'continuable'] as const) {
        const error = await thrown(() => h.runtime.spawn(parent, { label: 'l', ...spawn, mode, context: 'fresh', prompt: 'go', id: 'c' }))
        expect(error).toBeInstanceOf(SubagentError)
        expect(error).toMatchObject({ code: 'SUBAGENT_INVALID_DESCRIPTOR', details: { field, length: max + 1, max } })
        expect((error as Error).message).toContain(`${field} has ${max + 1} characters, more than ${max} (${limit})`)
        expect((error as Error).message).toContain('Nothing was written')
      }
    }
    expect(h.sessions.get('c')).toBeUndefined()
    expect(await codeOf(h.persistence!.inspect('c' as never))).toBe('SESSION_PERSISTENCE_NOT_FOUND')
    expect(await h.runtime.listChildren(parent.id)).toEqual([])
    expect(parent.events.length).toBe(before)
  })

  it('takes every field at its bound in worst-case characters, and a store persists the records', async () => {
    const h = await hosts.open({ driver: createScriptedDriver([{ kind: 'message', text: 'done' }]) })
    const parent = h.sessions.create()
    const name = escaped(SPAWN_NAME_MAX_CHARS)
    const settings = {
      agentProvider: name,
      agentModel: name,
      model: name,
      persona: escaped(SPAWN_PERSONA_MAX_CHARS),
      instructions: escaped(SPAWN_INSTRUCTIONS_MAX_CHARS),
    }
    const common = { context: 'fresh', label: escaped(SPAWN_LABEL_MAX_CHARS), provider: name, agentPreset: name, settings } as const
    // One-shot: everything but the label and provider in one options event; continuable: the persona in the descriptor.
    for (const mode of ['one-shot', 'continuable'] as const) {
      const child = h.runtime.spawn(parent, { ...common, mode, prompt: 'go' })
      expect((await child.done).end).toBe('completed')
      const stored = await h.persistence!.inspect(child.id)
      expect(stored.header.agentPreset).toBe(name)
      const records = stored.events.filter((e) => e.type === 'subagent/descriptor' || e.type === 'subagent/options')
      const merged = Object.assign({}, ...records.map((e) => e.data)) as Record<string, unknown>
      expect(merged).toMatchObject({ ...settings, label: common.label, provider: name, mode })
    }
    expect(await h.runtime.listChildren(parent.id)).toHaveLength(2)
    expect(h.errors).toEqual([])
  })

  it('refuses a record whose outputSchema or tool filter would encode past what an event holds, and creates no child', async () => {
    const h = await hosts.open()
    const parent = h.sessions.create({ id: 'parent' })
    const huge = escaped(3_000_000)
    const refused: [SubagentSettings, string][] = [
      [{ outputSchema: { type: 'string', description: huge } }, 'subagent/options'],
      [{ toolFilter: { deny: [huge] } }, 'subagent/options'],
    ]
    for (const [settings, event] of refused) {
      const error = await thrown(() => h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', settings, id: 'c' }))
      expect(error).toMatchObject({ code: 'SUBAGENT_INVALID_DESCRIPTOR', details: { event, max: expect.any(Number) } })
      const { bytes, max } = (error as SubagentError).details as { bytes: number; max: number }
      expect(bytes).toBeGreaterThan(max)
      expect(max).toBeLessThan(EVENT_MAX_BYTES)
      expect((error as Error).message).toContain('EVENT_MAX_BYTES')
    }
    // A continuable child's tool filter goes into its descriptor.
    const error = await thrown(() =>
      h.runtime.spawn(parent, { mode: 'continuable', label: 'l', context: 'fresh', settings: { toolFilter: { allow: [huge] } }, id: 'c' }),
    )
    expect(error).toMatchObject({ code: 'SUBAGENT_INVALID_DESCRIPTOR', details: { event: 'subagent/descriptor' } })
    expect(h.sessions.get('c')).toBeUndefined()
    expect(await codeOf(h.persistence!.inspect('c' as never))).toBe('SESSION_PERSISTENCE_NOT_FOUND')
    expect(await h.runtime.listChildren(parent.id)).toEqual([])
  })
})
