// The signed-in frame: navigation (real links, keyboard reachable), the org, sign out.
import { NavLink, Outlet, useNavigate } from "react-router-dom";
import { api, call } from "../api/client";
import { useSession } from "../session";

const PAGES = [
  ["/", "Overview"],
  ["/batches", "Batches"],
  ["/quotes", "New batch"],
  ["/usage", "Usage"],
  ["/billing", "Billing"],
  ["/keys", "API keys"],
  ["/settings", "Settings"],
] as const;

export function Layout() {
  const { session, refresh } = useSession();
  const navigate = useNavigate();
  async function signOut() {
    try {
      await call(api.DELETE("/v1/sessions/current"));
    } finally {
      await refresh();
      navigate("/sign-in");
    }
  }
  return (
    <div className="frame">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header>
        <strong className="brand">BatchRoute</strong>
        <nav aria-label="Console">
          <ul>
            {PAGES.map(([to, label]) => (
              <li key={to}>
                <NavLink to={to} end={to === "/"}>
                  {label}
                </NavLink>
              </li>
            ))}
          </ul>
        </nav>
        <div className="who">
          <span>{session?.email}</span>
          <button type="button" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Outlet />
      </main>
    </div>
  );
}
