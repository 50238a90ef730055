import { isDshError } from '@dsh/context'
import { EVENT_MAX_BYTES } from '@dsh/session-persistence/backend'
import { describe, expect, it } from 'vitest'
import {
  createScriptedDriver,
  INPUT_TEXT_MAX_CHARS,
  SETTINGS_MAX_DEPTH,
  SETTINGS_MAX_VALUES,
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
