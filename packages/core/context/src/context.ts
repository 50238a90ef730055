import { ContextError } from './errors.js'

/**
 * The typed service registry. Packages augment it:
 * `declare module '@dsh/context' { interface Services { sessions: SessionStore } }`
 */
export interface Services {
  /** Where isolated listener failures and fail-soft background errors are reported. */
  logger: Logger
}

/**
 * Typed events: each key maps to the listener's argument tuple. Packages
 * augment it the same way as `Services`.
 */
export interface ContextEvents {}

export type ServiceName = keyof Services & string
export type EventName = keyof ContextEvents & string
type EventArgs<E extends EventName> = Extract<ContextEvents[E], unknown[]>
export type Listener<E extends EventName> = (...args: EventArgs<E>) => unknown

/** Where isolated listener failures and fail-soft background errors go. */
export interface Logger {
  warn(message: string, error?: unknown): void
  error(message: string, error?: unknown): void
}

export const consoleLogger: Logger = {
  warn: (message, error) => console.warn(message, ...(error === undefined ? [] : [error])),
  error: (message, error) => console.error(message, ...(error === undefined ? [] : [error])),
}

/** The context a plugin's `activate` receives: required services are typed as present. */
export type PluginContext<R extends ServiceName = never, O extends ServiceName = never> = Context & {
  readonly [K in R]: Services[K]
} & { readonly [K in O]?: Services[K] | undefined }

export interface Plugin<R extends ServiceName = never, O extends ServiceName = never> {
  readonly name: string
  readonly inject?: { readonly required?: readonly R[]; readonly optional?: readonly O[] }
  activate(ctx: PluginContext<R, O>): void | Promise<void>
}

/** Declares a plugin with its injections inferred, so `ctx.<service>` is typed. */
export function definePlugin<R extends ServiceName = never, O extends ServiceName = never>(plugin: Plugin<R, O>): Plugin<R, O> {
  return plugin
}

export interface ContextOptions {
  /** Receives isolated listener failures; defaults to the `logger` service, then the console. */
  readonly logger?: Logger
}

/**
 * A deliberately small composition kernel: services, plugins, typed events
 * with isolated listeners, and ordered disposal.
 */
export class Context {
  readonly #services = new Map<string, unknown>()
  readonly #listeners = new Map<string, Set<(...args: never[]) => unknown>>()
  readonly #disposers: Array<() => unknown> = []
  readonly #logger: Logger | undefined
  #disposed = false

  constructor(options: ContextOptions = {}) {
    this.#logger = options.logger
  }

  /** Registers `impl` as service `name`; returns a function that withdraws it. */
  provide<K extends ServiceName>(name: K, impl: Services[K]): () => void {
    this.#assertLive()
    if (this.#services.has(name)) {
      throw new ContextError(
        'CONTEXT_SERVICE_CONFLICT',
        `Service '${name}' is already provided; withdraw the first provider before providing another.`,
      )
    }
    this.#services.set(name, impl)
    return () => {
      if (this.#services.get(name) === impl) this.#services.delete(name)
    }
  }

  /** Optional lookup: `undefined` when nobody provides `name`. */
  get<K extends ServiceName>(name: K): Services[K] | undefined {
    return this.#services.get(name) as Services[K] | undefined
  }

  /** Required lookup: throws `CONTEXT_SERVICE_UNAVAILABLE` naming the service and the caller. */
  require<K extends ServiceName>(name: K, requiredBy = 'caller'): Services[K] {
    if (!this.#services.has(name)) {
      throw new ContextError(
        'CONTEXT_SERVICE_UNAVAILABLE',
        `${requiredBy} requires service '${name}', but no plugin provides it. Provide '${name}' before activating ${requiredBy}.`,
        { details: { service: name, requiredBy } },
      )
    }
    return this.#services.get(name) as Services[K]
  }

  /**
   * Activates a plugin. Every required service is resolved first, so a missing
   * one fails here with `CONTEXT_SERVICE_UNAVAILABLE` (naming the plugin and the
   * service) instead of as a `TypeError` later.
   */
  async activate<R extends ServiceName, O extends ServiceName>(plugin: Plugin<R, O>): Promise<void> {
    this.#assertLive()
    const injected: Record<string, unknown> = {}
    for (const name of plugin.inject?.required ?? []) injected[name] = this.require(name, `plugin '${plugin.name}'`)
    for (const name of plugin.inject?.optional ?? []) injected[name] = this.get(name)
    // A view of this context with the injected services as properties; methods
    // stay bound to the real context (its private state is not inherited).
    const view = new Proxy(this, {
      get: (target, key, receiver) => {
        if (typeof key === 'string' && Object.hasOwn(injected, key)) return injected[key]
        const value: unknown = Reflect.get(target, key, receiver === view ? target : receiver)
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
      },
    }) as unknown as PluginContext<R, O>
    await plugin.activate(view)
  }

  /** Subscribes to `name`; returns the unsubscribe function. */
  on<E extends EventName>(name: E, listener: Listener<E>): () => void {
    let set = this.#listeners.get(name)
    if (!set) {
      set = new Set()
      this.#listeners.set(name, set)
    }
    const entry = listener as (...args: never[]) => unknown
    set.add(entry)
    return () => void set.delete(entry)
  }

  /**
   * Calls every listener synchronously. Each listener is isolated: a throw or
   * a rejected promise is reported to the logger and the others still run.
   */
  emit<E extends EventName>(name: E, ...args: EventArgs<E>): void {
    for (const listener of this.#snapshot(name)) {
      try {
        const result = (listener as (...a: unknown[]) => unknown)(...(args as unknown[]))
        if (isPromiseLike(result)) result.then(undefined, (error: unknown) => this.#report(name, error))
      } catch (error) {
        this.#report(name, error)
      }
    }
  }

  /**
   * Calls every listener and waits for all of them. Failures are isolated the
   * same way, but returned so a barrier (such as `flush`) can reject.
   */
  async emitAsync<E extends EventName>(name: E, ...args: EventArgs<E>): Promise<unknown[]> {
    const pending: Promise<unknown>[] = []
    for (const listener of this.#snapshot(name)) {
      try {
        pending.push(Promise.resolve((listener as (...a: unknown[]) => unknown)(...(args as unknown[]))))
      } catch (error) {
        pending.push(Promise.reject(error))
      }
    }
    const settled = await Promise.allSettled(pending)
    const failures = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason as unknown] : []))
    for (const failure of failures) this.#report(name, failure)
    return failures
  }

  /** Registers cleanup; `dispose()` runs cleanups in reverse registration order. */
  onDispose(disposer: () => unknown): void {
    this.#assertLive()
    this.#disposers.push(disposer)
  }

  get disposed(): boolean {
    return this.#disposed
  }

  /**
   * Runs every disposer in reverse order (so persistence registered after the
   * files it writes flushes before they close). A failing disposer is reported
   * and the rest still run.
   */
  async dispose(): Promise<void> {
    if (this.#disposed) return
    this.#disposed = true
    while (this.#disposers.length > 0) {
      const disposer = this.#disposers.pop()!
      try {
        await disposer()
      } catch (error) {
        this.#report('dispose', error)
      }
    }
    this.#listeners.clear()
    this.#services.clear()
  }

  #snapshot(name: string): Array<(...args: never[]) => unknown> {
    return [...(this.#listeners.get(name) ?? [])]
  }

  #report(event: string, error: unknown): void {
    const logger = this.#logger ?? (this.#services.get('logger') as Logger | undefined) ?? consoleLogger
    logger.error(`dsh: a '${event}' listener failed; the other listeners still ran.`, error)
  }

  #assertLive(): void {
    if (this.#disposed) throw new ContextError('CONTEXT_DISPOSED', 'This context has been disposed; create a new one.')
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function'
}
