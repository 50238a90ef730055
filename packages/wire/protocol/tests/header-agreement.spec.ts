import { parseSessionHeader, SESSION_HEADER_WITNESS_FIELDS, type SessionHeader, type SessionId } from '@dsh/session'
import fc from 'fast-check'
import { describe, expect, expectTypeOf, it } from 'vitest'
import { sessionHeader, type WireSessionHeader } from '../src/index.js'
import { idFault } from '../src/limits.js'

// `@dsh/session` keeps its own dependency-free header parser; the wire schema
// is declared here. These tests keep the two from drifting apart.

/** Brands are compile-time only: on the wire a `SessionId` is a string. */
type Unbrand<V> = V extends SessionId ? string : V
/** Every field, required and mutable, with its value type (absence aside). */
type Fields<T> = { -readonly [K in keyof T]-?: Exclude<Unbrand<T[K]>, undefined> }
type OptionalKeys<T> = { [K in keyof T]-?: undefined extends T[K] ? K : never }[keyof T]

describe('the wire header and @dsh/session agree', () => {
  it('at the type level: the same fields, value types and optionality', () => {
    expectTypeOf<Fields<WireSessionHeader>>().toEqualTypeOf<Fields<SessionHeader>>()
    expectTypeOf<OptionalKeys<WireSessionHeader>>().toEqualTypeOf<OptionalKeys<SessionHeader>>()
    // Every core header is a valid wire header as it is.
    expectTypeOf<SessionHeader>().toExtend<WireSessionHeader>()
  })

  it('on the field list the lifecycle witness compares', () => {
    expect(Object.keys(sessionHeader.shape).sort()).toEqual([...SESSION_HEADER_WITNESS_FIELDS].sort())
  })

  it('at run time: every header the core parser accepts, the wire schema accepts unchanged', () => {
    const headerInput = fc.record(
      {
        version: fc.constant(1),
        id: fc.string({ minLength: 1 }),
        createdAt: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        cwd: fc.constantFrom('/work', '/tmp/x y', '/'),
        parentSession: fc.string({ minLength: 1 }),
        isSeeded: fc.boolean(),
        delegationDepth: fc.nat(),
        origin: fc.constant('subagent'),
        agentPreset: fc.string(),
      },
      { requiredKeys: ['version', 'id', 'createdAt', 'isSeeded', 'delegationDepth'] },
    )
    fc.assert(
      fc.property(headerInput, (input) => {
        let core: SessionHeader
        try {
          core = parseSessionHeader(input)
        } catch {
          // An id no store takes (`idFault`): the core refuses it at create, the routes refuse it on the way in
          // (`idParam`), and the header schema, which describes what stores hold, never meets one.
          if (idFault(input.id) !== undefined) return
          // The other input the core refuses here: a subagent without a parent. The wire refuses it too.
          expect(sessionHeader.safeParse(input).success).toBe(false)
          return
        }
        expect(sessionHeader.parse(core)).toEqual({ ...core })
      }),
    )
  })

  it('at run time: both refuse the same malformed headers', () => {
    const valid = { version: 1, id: 'a', createdAt: 1, isSeeded: false, delegationDepth: 0 }
    const malformed = [
      { ...valid, version: 2 },
      { ...valid, id: '' },
      { ...valid, createdAt: -1 },
      { ...valid, createdAt: 1.5 },
      { ...valid, isSeeded: 'no' },
      { ...valid, delegationDepth: -1 },
      { ...valid, origin: 'fork', parentSession: 'p' },
      { ...valid, origin: 'subagent' },
      { ...valid, parentSession: '' },
    ]
    for (const input of malformed) {
      expect(() => parseSessionHeader(input), JSON.stringify(input)).toThrow()
      expect(sessionHeader.safeParse(input).success, JSON.stringify(input)).toBe(false)
    }
  })
})
