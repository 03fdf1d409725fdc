// Sign up, sign in, forgot password, reset password: the public auth endpoints (docs/auth.md).
// Passwords live only in the form's state; nothing is written to local storage.
import { useState, type FormEvent } from "react";
import { Link, Navigate, useLocation, useNavigate, useSearchParams } from "react-router-dom";
import { api, call } from "../api/client";
import { useSession } from "../session";
import { ErrorLine, Field, Notice } from "../components/ui";

function AuthFrame({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <main id="main" className="auth">
      <h1>{title}</h1>
      {children}
    </main>
  );
}

/** Where the sign-in page leads: the signed-in page that sent the visitor here, else the overview. */
function useReturnPath(): string {
  const from = (useLocation().state as { from?: unknown } | null)?.from;
  return typeof from === "string" && from.startsWith("/") && !from.startsWith("//") ? from : "/";
}

export function SignIn() {
  const { session, refresh } = useSession();
  const navigate = useNavigate();
  const back = useReturnPath();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  if (session) return <Navigate to={back} replace />;
  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    try {
      await call(api.POST("/v1/auth/login", { body: { email, password } }));
      setPassword("");
      await refresh();
      navigate(back, { replace: true });
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  }
  return (
    <AuthFrame title="Sign in">
      <form onSubmit={(e) => void submit(e)}>
        <Field id="email" label="Email">
          <input id="email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </Field>
        <Field id="password" label="Password">
          <input id="password" type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        </Field>
        <ErrorLine error={error} />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      <p>
        <Link to="/sign-up">Create an account</Link> · <Link to="/forgot-password">Forgot password?</Link>
      </p>
    </AuthFrame>
  );
}

export function SignUp() {
  const { refresh } = useSession();
  const navigate = useNavigate();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [fullName, setFullName] = useState("");
  const [orgName, setOrgName] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    try {
      await call(
        api.POST("/v1/auth/register", {
          body: { email, password, full_name: fullName || null, display_name: orgName || null },
        }),
      );
      // Registration does not sign in: sign in with the same credentials, then forget them.
      await call(api.POST("/v1/auth/login", { body: { email, password } }));
      setPassword("");
      await refresh();
      navigate("/");
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  }
  return (
    <AuthFrame title="Create an account">
      <form onSubmit={(e) => void submit(e)}>
        <Field id="email" label="Email">
          <input id="email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </Field>
        <Field id="password" label="Password" hint="At least 8 characters.">
          <input id="password" type="password" autoComplete="new-password" required minLength={8} value={password} onChange={(e) => setPassword(e.target.value)} />
        </Field>
        <Field id="full-name" label="Your name (optional)">
          <input id="full-name" autoComplete="name" value={fullName} onChange={(e) => setFullName(e.target.value)} />
        </Field>
        <Field id="org-name" label="Organization name (optional)">
          <input id="org-name" autoComplete="organization" value={orgName} onChange={(e) => setOrgName(e.target.value)} />
        </Field>
        <ErrorLine error={error} />
        <button type="submit" disabled={busy}>
          Create account
        </button>
      </form>
      <p>
        Already have an account? <Link to="/sign-in">Sign in</Link>
      </p>
    </AuthFrame>
  );
}

export function ForgotPassword() {
  const [email, setEmail] = useState("");
  const [sent, setSent] = useState(false);
  const [error, setError] = useState<unknown>(null);
  async function submit(event: FormEvent) {
    event.preventDefault();
    try {
      await call(api.POST("/v1/auth/password/forgot", { body: { email } }));
      setSent(true);
      setError(null);
    } catch (caught) {
      setError(caught);
    }
  }
  return (
    <AuthFrame title="Forgot password">
      <form onSubmit={(e) => void submit(e)}>
        <Field id="email" label="Email">
          <input id="email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </Field>
        <ErrorLine error={error} />
        <button type="submit">Send reset link</button>
      </form>
      {sent && <Notice>If an account uses this address, a reset link is on its way.</Notice>}
      <p>
        <Link to="/sign-in">Back to sign in</Link>
      </p>
    </AuthFrame>
  );
}

/** The page the reset email links to (`/reset-password?token=...`, served at the console). */
export function ResetPassword() {
  const [params] = useSearchParams();
  const [password, setPassword] = useState("");
  const [done, setDone] = useState(false);
  const [error, setError] = useState<unknown>(null);
  async function submit(event: FormEvent) {
    event.preventDefault();
    try {
      await call(api.POST("/v1/auth/password/reset", { body: { token: params.get("token") ?? "", password } }));
      setPassword("");
      setDone(true);
    } catch (caught) {
      setError(caught);
    }
  }
  return (
    <AuthFrame title="Choose a new password">
      {done ? (
        <Notice>
          Password changed; every session was signed out. <Link to="/sign-in">Sign in</Link>
        </Notice>
      ) : (
        <form onSubmit={(e) => void submit(e)}>
          <Field id="password" label="New password" hint="At least 8 characters.">
            <input id="password" type="password" autoComplete="new-password" required minLength={8} value={password} onChange={(e) => setPassword(e.target.value)} />
          </Field>
          <ErrorLine error={error} />
          <button type="submit">Change password</button>
        </form>
      )}
    </AuthFrame>
  );
}
