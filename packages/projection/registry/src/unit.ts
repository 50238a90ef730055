import type { StoredSessionEvent } from '@dsh/session'
import { SessionProjectionError } from './errors.js'
import type { ProjectionInitContext, SessionProjectionUnit } from './types.js'

/**
 * A unit with its key types erased: the registry stores units of every key in
 * one table, and states are opaque to it.
 */
export interface ErasedUnit {
  readonly key: string
  readonly stateVersion: number
  init(context: ProjectionInitContext): unknown
  apply(state: unknown, event: StoredSessionEvent): unknown
  view(state: unknown): unknown
  readonly schema: { safeParse(input: unknown): { success: true; data: unknown } | { success: false; error: unknown } }
}

/** Checks the shape of a unit before anything folds through it; throws `SESSION_PROJECTION_INVALID_UNIT`. */
export function validateUnit(input: SessionProjectionUnit<never> | unknown): ErasedUnit {
  const unit = input as Partial<Record<keyof ErasedUnit, unknown>> | null
  const invalid = (why: string): never => {
    throw new SessionProjectionError(
      'SESSION_PROJECTION_INVALID_UNIT',
      `Cannot register projection unit${typeof unit?.key === 'string' ? ` '${unit.key}'` : ''}: ${why}.`,
    )
  }
  if (typeof unit !== 'object' || unit === null) return invalid('a unit must be an object')
  if (typeof unit.key !== 'string' || unit.key.length === 0) invalid('key must be a non-empty string')
  const version = unit.stateVersion
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 0 || Object.is(version, -0)) {
    invalid('stateVersion must be a non-negative integer')
  }
  for (const fn of ['init', 'apply', 'view'] as const) {
    if (typeof unit[fn] !== 'function') invalid(`${fn} must be a function`)
  }
  const schema = unit.schema as { safeParse?: unknown } | null | undefined
  if (typeof schema !== 'object' || schema === null || typeof schema.safeParse !== 'function') {
    invalid('schema must be a zod schema (it validates checkpointed state)')
  }
  return unit as unknown as ErasedUnit
}
