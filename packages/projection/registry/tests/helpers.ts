import { Context, type Logger } from '@dsh/context'
import { SessionStore } from '@dsh/session'
import { createProjectionRegistry, type ProjectionRegistry } from '../src/index.js'

export interface Harness {
  ctx: Context
  sessions: SessionStore
  registry: ProjectionRegistry
  warnings: string[]
  errors: unknown[]
}

/** A real context with a store and a registry following it; warnings are collected instead of printed. */
export function harness(): Harness {
  const warnings: string[] = []
  const errors: unknown[] = []
  const logger: Logger = { warn: (message) => void warnings.push(message), error: (_message, error) => void errors.push(error) }
  const ctx = new Context({ logger })
  ctx.provide('logger', logger)
  let n = 0
  const sessions = new SessionStore(ctx, { clock: () => 1_700_000_000_000 + n, newId: () => `s${++n}` })
  ctx.provide('sessions', sessions)
  const registry = createProjectionRegistry(ctx)
  return { ctx, sessions, registry, warnings, errors }
}
