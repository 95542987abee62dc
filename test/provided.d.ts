// What the global setup (test/setup/global.ts) provides to the tests through vitest's inject().
export {};

declare module "vitest" {
  export interface ProvidedContext {
    /** the port of the real origin server on loopback */
    originPort: number;
  }
}
