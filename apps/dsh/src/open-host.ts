import { createHost, type Host, type HostOptions } from './host.js'

/** Opens a host over `root` for one command and always disposes it. */
export async function withHost<T>(root: string, run: (host: Host) => Promise<T>, options: Omit<HostOptions, 'root'> = {}): Promise<T> {
  const host = await createHost({ root, ...options })
  try {
    return await run(host)
  } finally {
    await host.dispose()
  }
}
