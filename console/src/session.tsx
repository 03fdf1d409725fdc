// Who is signed in: GET /v1/sessions/current (the HttpOnly cookie is never readable here).
import { createContext, useCallback, useContext, useEffect, useState, type ReactNode } from "react";
import { api, call, onSessionEnded, type Schemas } from "./api/client";

type SessionView = NonNullable<Schemas["SessionEnvelope"]["session"]>;

interface SessionState {
  session: SessionView | null;
  loading: boolean;
  refresh: () => Promise<void>;
}

const SessionContext = createContext<SessionState>({
  session: null,
  loading: true,
  refresh: async () => {},
});

export function SessionProvider({ children }: { children: ReactNode }) {
  const [session, setSession] = useState<SessionView | null>(null);
  const [loading, setLoading] = useState(true);
  const refresh = useCallback(async () => {
    try {
      const body = await call(api.GET("/v1/sessions/current"));
      setSession(body.session ?? null);
    } catch {
      setSession(null);
    } finally {
      setLoading(false);
    }
  }, []);
  useEffect(() => {
    void refresh();
  }, [refresh]);
  // A call answered 401 (the session expired or was ended elsewhere): signed out, so the
  // signed-in pages give way to the sign-in page, which leads back here afterwards.
  useEffect(() => onSessionEnded(() => setSession(null)), []);
  return <SessionContext.Provider value={{ session, loading, refresh }}>{children}</SessionContext.Provider>;
}

export function useSession(): SessionState {
  return useContext(SessionContext);
}
