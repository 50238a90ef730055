import { Context, isDshError } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { createMemoryPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { createSessionQuery } from '@dsh/session-query'

export interface Gate {
  readonly promise: Promise<void>
  open(): void
}

/** A promise a test opens when it chooses (a child's turn held open until then). */
export function gate(): Gate {
  let open!: () => void
  const promise = new Promise<void>((resolve) => (open = resolve))
  return { promise, open }
}

/** The code a promise rejects with (`resolved` when it does not). */
export async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
  } catch (error) {
    return isDshError(error) ? error.code : String(error)
  }
  return 'resolved'
}

/**
 * A real context for the tools to run in, short of the subagents service
 * (the test activates it with its own driver): a session store on a clock
 * that counts up by one per reading, projections, memory persistence that
 * writes at once, and the memory query corpus over both.
 */
export async function storeContext(): Promise<Context> {
  const ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
  let now = 1_700_000_000_000
  await ctx.activate(sessionStorePlugin({ clock: () => now++ }))
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionPersistencePlugin(createMemoryPersistence(), { writeBehindMs: 0 }))
  ctx.provide('sessionQuery', createSessionQuery({ sessions: ctx.require('sessions'), persistence: ctx.require('sessionPersistence') }))
  return ctx
}
