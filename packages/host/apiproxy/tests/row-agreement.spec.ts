import { type SubagentListEntryBody, subagentListEntry } from '@dsh/protocol'
import type { SessionId } from '@dsh/session'
import type { ExplainedSubagentEntry, SubagentListEntry, SubagentRuntime } from '@dsh/subagent'
import { describe, expect, expectTypeOf, it } from 'vitest'
import type { ApiSubagentCatalog } from '../src/index.js'

// The catalog row is declared once, in @dsh/protocol; the subagent runtime
// returns its own (branded, readonly) type. These checks keep them equal.

type Unbrand<V> = V extends SessionId ? string : V
type Arm<T> = { -readonly [K in keyof T]-?: Exclude<Unbrand<T[K]>, undefined> }
type OptionalKeys<T> = { [K in keyof T]-?: undefined extends T[K] ? K : never }[keyof T]
type ArmOf<T, K, M = never> = Extract<T, { kind: K } & ([M] extends [never] ? unknown : { mode: M })>

describe('the catalog row of @dsh/subagent and @dsh/protocol agree', () => {
  it('arm by arm, at the type level', () => {
    expectTypeOf<Arm<ArmOf<SubagentListEntry, 'child', 'one-shot'>>>().toEqualTypeOf<
      Arm<ArmOf<SubagentListEntryBody, 'child', 'one-shot'>>
    >()
    expectTypeOf<Arm<ArmOf<SubagentListEntry, 'child', 'continuable'>>>().toEqualTypeOf<
      Arm<ArmOf<SubagentListEntryBody, 'child', 'continuable'>>
    >()
    expectTypeOf<Arm<ArmOf<SubagentListEntry, 'diagnostic'>>>().toEqualTypeOf<Arm<ArmOf<SubagentListEntryBody, 'diagnostic'>>>()
    expectTypeOf<OptionalKeys<ArmOf<SubagentListEntry, 'child', 'one-shot'>>>().toEqualTypeOf<
      OptionalKeys<ArmOf<SubagentListEntryBody, 'child', 'one-shot'>>
    >()
    expectTypeOf<OptionalKeys<ArmOf<SubagentListEntry, 'child', 'continuable'>>>().toEqualTypeOf<
      OptionalKeys<ArmOf<SubagentListEntryBody, 'child', 'continuable'>>
    >()
    // What the runtime explains is what the host serves.
    expectTypeOf<ExplainedSubagentEntry['row']>().toExtend<SubagentListEntryBody>()
    expectTypeOf<SubagentRuntime>().toExtend<ApiSubagentCatalog>()
  })

  it('at run time, the strong contract: a continuable child without a label is no row', () => {
    expect(
      subagentListEntry.safeParse({ kind: 'child', id: 'c', activity: 'inactive', hasChildren: false, mode: 'continuable' }).success,
    ).toBe(false)
    expect(
      subagentListEntry.safeParse({ kind: 'child', id: 'c', activity: 'inactive', hasChildren: false, mode: 'one-shot' }).success,
    ).toBe(true)
  })
})
